package client_test

import (
	"testing"

	_ "github.com/agentstate/agentstate/node/client"
	"github.com/agentstate/agentstate/node/codec"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
)

// TestImportLeavesTheProcessCodecAlone: importing the client changes no
// process-wide codec; DialOptions force the node's codec per connection.
func TestImportLeavesTheProcessCodecAlone(t *testing.T) {
	if encoding.GetCodecV2(proto.Name) == codec.Codec() {
		t.Fatal("the process's proto codec was replaced by the node's")
	}
}
