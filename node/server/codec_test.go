package server

import (
	"testing"

	"github.com/agentstate/agentstate/node/codec"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
)

// TestEmbeddingLeavesTheProcessCodecAlone: a program that embeds the node
// (this test binary imports the server and everything it does) keeps
// grpc's own "proto" codec; the node's codec is forced on its own server
// only.
func TestEmbeddingLeavesTheProcessCodecAlone(t *testing.T) {
	if encoding.GetCodecV2(proto.Name) == codec.Codec() {
		t.Fatal("the process's proto codec was replaced by the node's")
	}
}
