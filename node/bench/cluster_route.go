package bench

import (
	nodeclient "github.com/agentstate/agentstate/node/client"
	"google.golang.org/grpc"
)

// clusterConns are a cluster run's client connections, grpcConns per
// member in member order, and their owner routers when the callers route
// to owners (ClusterConfig.RouteToOwner).
type clusterConns struct {
	conns   []*grpc.ClientConn
	routers []*nodeclient.OwnerRouter
}

// dialMember adds grpcConns connections to the member at addr, each with
// an OwnerRouter of its own when route is set: a caller's requests for a
// session or plan then go to its owner once a member named it, as a
// client dialled with client.Options.RouteToOwner does.
func (c *clusterConns) dialMember(addr string, route bool) error {
	for range grpcConns() {
		opts := connOptions("")
		if route {
			r := nodeclient.NewOwnerRouter(opts...)
			c.routers = append(c.routers, r)
			// First, as client.DialOptions puts it.
			opts = append([]grpc.DialOption{r.DialOption()}, opts...)
		}
		conn, err := grpc.NewClient(addr, opts...)
		if err != nil {
			return err
		}
		c.conns = append(c.conns, conn)
	}
	return nil
}

// stats sums the routers' counts.
func (c *clusterConns) stats() nodeclient.RouteStats {
	var s nodeclient.RouteStats
	for _, r := range c.routers {
		rs := r.Stats()
		s.Routed += rs.Routed
		s.Hinted += rs.Hinted
		s.FellBack += rs.FellBack
	}
	return s
}

func (c *clusterConns) close() {
	closeConns(c.conns)
	for _, r := range c.routers {
		r.Close()
	}
}
