package natsembed

import "github.com/nats-io/nats-server/v2/server"

// LocalStreamMsgs returns the number of messages in this node's own copy
// of the stream (not the stream leader's), and whether the node has one.
func LocalStreamMsgs(n *Node, stream string) (uint64, bool) {
	info, err := n.server.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil {
		return 0, false
	}
	for _, acc := range info.AccountDetails {
		for _, s := range acc.Streams {
			if s.Name == stream {
				return s.State.Msgs, true
			}
		}
	}
	return 0, false
}

// ReplicasFor returns the replicas of a node listening on listen for the
// cluster with the given routes, without starting it.
func ReplicasFor(listen string, routes []string) int {
	p, err := parseConfig(Config{Dir: "unused", ClusterListen: listen, Routes: routes})
	if err != nil {
		panic(err)
	}
	return p.replicas
}
