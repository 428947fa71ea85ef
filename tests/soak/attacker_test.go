package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// attackerEnv carries, to this test binary run again as the attacking
// process, its orders: attackOrders as JSON.
const attackerEnv = "AGENTSTATE_SOAK_ATTACKER"

type attackOrders struct {
	Attacks  Attacks
	Addr     string
	Duration time.Duration
}

// attackerProc is the attacking process.
type attackerProc struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	errOut bytes.Buffer
}

// startAttacker runs a's attacks on the node's gRPC API at addr for d in a
// process of its own.
func startAttacker(a Attacks, addr string, d time.Duration) (*attackerProc, error) {
	orders, err := json.Marshal(attackOrders{Attacks: a, Addr: addr, Duration: d})
	if err != nil {
		return nil, err
	}
	p := &attackerProc{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	p.cmd.Env = append(os.Environ(), attackerEnv+"="+string(orders))
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.errOut
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the attacker: %w", err)
	}
	return p, nil
}

// wait waits for the attacker to finish and returns its tally (or why
// there is none).
func (p *attackerProc) wait() string {
	if err := p.cmd.Wait(); err != nil {
		return fmt.Sprintf("attacker failed: %v: %s", err, strings.TrimSpace(p.errOut.String()))
	}
	return strings.TrimSpace(p.out.String())
}

// runAttacker is the attacking process: it runs its orders and prints the
// tally on stdout.
func runAttacker(cfg string) int {
	var o attackOrders
	if err := json.Unmarshal([]byte(cfg), &o); err != nil {
		fmt.Fprintln(os.Stderr, "attacker:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Duration)
	defer cancel()
	var t Tally
	o.Attacks.Run(ctx, o.Addr, &t)
	fmt.Println(t.String())
	return 0
}
