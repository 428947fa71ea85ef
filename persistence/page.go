package persistence

// Message pages are bounded by bytes as well as by count, so that a page of
// large messages stays inside what a default gRPC client receives (4 MiB)
// and a page read costs the node memory independent of the limit asked for.
//
// Reader.ListMessages stops before the message that would take the page's
// payload past MaxPageBytes, except that a page always holds at least one
// message: a session can always be read to its end, whatever its messages'
// sizes. The largest message the session service accepts (1 MiB of content
// plus 1 MiB of metadata) makes a page of about 2 MiB on its own.
const MaxPageBytes = 1 << 20

// MessageOverhead is what a message costs in a page beyond its content and
// metadata: its ids, sequence, role and time on the wire, rounded up.
const MessageOverhead = 128

// MessagePageBytes is what one message counts against MaxPageBytes.
func MessagePageBytes(contentBytes, metadataBytes int) int {
	return contentBytes + metadataBytes + MessageOverhead
}
