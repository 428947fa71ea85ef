package soak

// The attacks below speak HTTP/2 directly, beneath gRPC, so that they can
// do what no gRPC client would: ignore the node's stream bound, or open a
// connection and never send a request.

import (
	"bytes"
	"context"
	"io"
	"net"
	"time"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// idleStreams opens n streams on one raw HTTP/2 connection, ignoring the
// node's SETTINGS_MAX_CONCURRENT_STREAMS, leaves them idle, and counts the
// node's refusals; it reopens the connection if the node closes it.
func idleStreams(ctx context.Context, addr string, n int, t *Tally) {
	for ctx.Err() == nil {
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			t.add("idle_streams:dial_error", 1)
			pause(ctx, 100*time.Millisecond)
			continue
		}
		stop := context.AfterFunc(ctx, func() { raw.Close() })
		fr := http2.NewFramer(raw, raw)
		if _, err := io.WriteString(raw, http2.ClientPreface); err == nil && fr.WriteSettings() == nil {
			// Ack the node's settings before opening streams; then only
			// the reader below reads and this goroutine writes.
			if ackSettings(fr) == nil {
				done := make(chan struct{})
				go func() {
					defer close(done)
					for {
						f, err := fr.ReadFrame()
						if err != nil {
							return
						}
						if f, ok := f.(*http2.RSTStreamFrame); ok && f.ErrCode == http2.ErrCodeRefusedStream {
							t.add("idle_streams:refused", 1)
						}
					}
				}()
				block := headerBlock("/" + sessionv1.SessionService_ServiceDesc.ServiceName + "/AppendBatches")
				for i := range n {
					if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block, EndHeaders: true}) != nil {
						break
					}
					t.add("idle_streams:opened", 1)
				}
				<-done // the node or ctx closed the connection
			}
		}
		stop()
		raw.Close()
		if ctx.Err() == nil {
			t.add("idle_streams:closed_by_node", 1)
			pause(ctx, 100*time.Millisecond)
		}
	}
}

func ackSettings(fr *http2.Framer) error {
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			return fr.WriteSettingsAck()
		}
	}
}

func headerBlock(path string) []byte {
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "node"}, {":path", path},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}) // writes to a buffer
	}
	return b.Bytes()
}

// idleConn opens connections that send the HTTP/2 preface and settings and
// then nothing, counting those the node closes, and opens the next.
func idleConn(ctx context.Context, addr string, t *Tally) {
	for ctx.Err() == nil {
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			t.add("idle_conns:dial_error", 1)
			pause(ctx, 100*time.Millisecond)
			continue
		}
		stop := context.AfterFunc(ctx, func() { raw.Close() })
		fr := http2.NewFramer(raw, raw)
		if _, err := io.WriteString(raw, http2.ClientPreface); err == nil && fr.WriteSettings() == nil {
			t.add("idle_conns:opened", 1)
			for {
				if _, err := fr.ReadFrame(); err != nil {
					break
				}
			}
		}
		stop()
		raw.Close()
		if ctx.Err() == nil {
			t.add("idle_conns:closed_by_node", 1)
		}
	}
}
