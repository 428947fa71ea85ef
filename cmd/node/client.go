package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	nodeclient "github.com/agentstate/agentstate/node/client"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// clientOptions are the connection flags shared by every client command.
type clientOptions struct {
	addr       string
	tokenFile  string
	tlsCA      string
	certFile   string
	keyFile    string
	tlsOn      bool
	serverName string
	insecure   bool
	timeout    time.Duration
}

func (o *clientOptions) register(c *cobra.Command) {
	fs := c.PersistentFlags()
	fs.StringVar(&o.addr, "addr", "127.0.0.1:7420", "gRPC address of the node")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the bearer token to present")
	fs.BoolVar(&o.tlsOn, "tls", false, "use TLS, verifying the node with the system roots (implied by --tls-ca)")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "PEM CA bundle that signed the node's certificate (enables TLS)")
	fs.StringVar(&o.certFile, "tls-client-cert", "", "PEM client certificate to present (with --tls-client-key; enables TLS): a principal of the node's --auth-file may authenticate by it")
	fs.StringVar(&o.keyFile, "tls-client-key", "", "PEM private key of --tls-client-cert")
	fs.StringVar(&o.serverName, "tls-server-name", "", "name to verify in the node's certificate (default: the host of --addr)")
	fs.BoolVar(&o.insecure, "insecure", false, "use TLS without verifying the node's certificate (testing only)")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "deadline of each request")
	fromEnv(fs, "addr", "token-file", "tls", "tls-ca", "tls-client-cert", "tls-client-key", "tls-server-name", "insecure", "timeout")
}

// client is one connection to a node plus the call conventions of the CLI.
type client struct {
	conn    *grpc.ClientConn
	timeout time.Duration
	out     *bufio.Writer
}

func (o *clientOptions) dial(cmd *cobra.Command) (*client, error) {
	opts := nodeclient.Options{TLS: o.tlsOn, ServerName: o.serverName, InsecureSkipVerify: o.insecure}
	if o.tlsCA != "" {
		pool, err := nodeclient.LoadCertPool(o.tlsCA)
		if err != nil {
			return nil, err
		}
		opts.RootCAs = pool
	}
	if o.certFile != "" || o.keyFile != "" {
		if o.certFile == "" || o.keyFile == "" {
			return nil, fmt.Errorf("--tls-client-cert and --tls-client-key go together")
		}
		cert, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
		if err != nil {
			return nil, fmt.Errorf("load the client certificate: %w", err)
		}
		opts.Certificates = []tls.Certificate{cert}
	}
	if o.tokenFile != "" {
		tok, err := nodeclient.ReadToken(o.tokenFile)
		if err != nil {
			return nil, err
		}
		opts.Token = tok
	}
	// Dial includes OutcomeOptions: a write whose connection broke after
	// it was sent exits 11 (outcome unknown), not 8 (unavailable, nothing
	// stored).
	conn, err := nodeclient.Dial(o.addr, opts)
	if err != nil {
		return nil, err
	}
	return &client{conn: conn, timeout: o.timeout, out: bufio.NewWriter(cmd.OutOrStdout())}, nil
}

func (c *client) Close() error {
	flushErr := c.out.Flush()
	if err := c.conn.Close(); err != nil {
		return err
	}
	return flushErr
}

// ctx is the context of one request: its deadline (the token comes with
// the connection).
func (c *client) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, c.timeout)
}

// print writes m as one line of protojson.
func (c *client) print(m proto.Message) error {
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := c.out.Write(b); err != nil {
		return err
	}
	return c.out.WriteByte('\n')
}

// readInput reads a file argument; "-" is standard input.
func readInput(cmd *cobra.Command, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(cmd.InOrStdin())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// withClient wraps a client command: dial, run fn, flush and close.
func withClient(o *clientOptions, fn func(cmd *cobra.Command, c *client) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		c, err := o.dial(cmd)
		if err != nil {
			return err
		}
		runErr := fn(cmd, c)
		closeErr := c.Close()
		if runErr != nil {
			return o.explain(runErr)
		}
		return closeErr
	}
}

// explain adds a hint to a failure whose likely cause is the command
// line's: a plaintext connection to a node that serves TLS fails as
// UNAVAILABLE "error reading server preface", which names neither TLS nor
// the flag that fixes it.
func (o *clientOptions) explain(err error) error {
	plaintext := !o.tlsOn && o.tlsCA == "" && !o.insecure
	e, ok := remoteError(err)
	if !ok || !plaintext || e.Code != errs.UnavailableCode || !strings.Contains(e.Msg, "server preface") {
		return err
	}
	return &errs.Error{Code: e.Code, Msg: e.Msg + "; the node may require TLS: use --tls-ca FILE (the CA that signed its " +
		"certificate) or --tls (a certificate the system trusts)"}
}

// pages runs a paged call: it fetches and prints one page and, with all,
// the following ones. next moves the request's cursor past reply r and says
// whether another page follows.
func pages[R proto.Message](cmd *cobra.Command, cl *client, all bool, fetch func(context.Context) (R, error), next func(r R) bool) error {
	for {
		ctx, cancel := cl.ctx(cmd.Context())
		resp, err := fetch(ctx)
		cancel()
		if err != nil {
			return err
		}
		if err := cl.print(resp); err != nil {
			return err
		}
		if !all || !next(resp) {
			return nil
		}
	}
}

// call makes one call and prints its reply.
func call(cmd *cobra.Command, cl *client, fetch func(context.Context) (proto.Message, error)) error {
	return pages(cmd, cl, false, fetch, nil)
}
