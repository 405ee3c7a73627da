// Package zmqtransport implements kvevents.Transport with libzmq through
// github.com/pebbe/zmq4 (cgo). It is its own package so that code which only
// decodes events or queries the index never links libzmq.
//
// Each endpoint gets a SUB socket (connected, or bound when the publisher
// connects) with libzmq's own reconnect backoff, a socket monitor whose
// handshake events become kvevents' Connected notices (queued before any
// message of that connection), and, for replays, a fresh DEALER per request so
// a reply to an abandoned replay can never be mistaken for the next one's.
// ServeReplay is the other end of the replay protocol, the publisher's, which
// the simulated engines and the tests' publishers share.
//
// Tests run against real sockets on loopback ports: publishers written with
// pebbe/zmq4 and kvevents.EncodeBatch, and
// router/kvevents/testdata/publisher.py written with pyzmq and python3-msgpack.
package zmqtransport
