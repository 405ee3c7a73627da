package peers

import (
	"context"
	"crypto/subtle"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// The exchange runs over gRPC, the field's transport for streams between
// services, with frames of its own (wire.go) instead of protobuf: two
// server-streaming methods, Follow (a replica's batches, as they happen)
// and Snapshot (its index, for a warm start).
const (
	serviceName    = "llmd.router.peer.v1.Peer"
	methodFollow   = "/" + serviceName + "/Follow"
	methodSnapshot = "/" + serviceName + "/Snapshot"
)

// frame is one message as bytes; codec passes it through.
type frame struct{ b []byte }

// codec is the gRPC codec of frames.
type codec struct{}

func (codec) Name() string { return "llmd-peer" }

func (codec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("peers: cannot marshal %T", v)
	}
	return f.b, nil
}

func (codec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("peers: cannot unmarshal into %T", v)
	}
	f.b = append(f.b[:0], data...)
	return nil
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{
		{StreamName: "Follow", ServerStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			return srv.(*Exchange).serveFollow(ss)
		}},
		{StreamName: "Snapshot", ServerStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			return srv.(*Exchange).serveSnapshot(ss)
		}},
	},
}

// Keepalive: a partitioned peer is noticed within keepaliveTime plus
// keepaliveTimeout even while no frame flows (full batches flow every
// FullEvery anyway).
const (
	keepaliveTime    = 5 * time.Second
	keepaliveTimeout = 5 * time.Second
)

// NewServer returns a gRPC server serving x to its peers. Only hellos
// travel towards it, so it takes frames of a few hundred bytes.
func NewServer(x *Exchange) *grpc.Server {
	g := grpc.NewServer(grpc.ForceServerCodec(codec{}), grpc.MaxRecvMsgSize(1<<10),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: keepaliveTime, Timeout: keepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveTime / 2, PermitWithoutStream: true}))
	g.RegisterService(&serviceDesc, x)
	return g
}

// dial returns a client connection to the peer at addr (host:port); it
// connects lazily and reconnects by itself.
func dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		// gRPC's own reconnect backoff (1 s doubling to 2 min by default)
		// would outlast the follower's; keep it as short.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: retryMin, Multiplier: 2, Jitter: 0.2, MaxDelay: retryMax},
			MinConnectTimeout: 5 * time.Second}),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(codec{}), grpc.MaxCallRecvMsgSize(maxFrameBytes)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: keepaliveTime, Timeout: keepaliveTimeout, PermitWithoutStream: true}))
}

// open starts method on cc with x's hello, and its token if any. With
// waitReady it waits while the peer cannot be reached (gRPC reconnects on
// its backoff), else it fails at once.
func (x *Exchange) open(ctx context.Context, cc *grpc.ClientConn, method string, waitReady bool) (grpc.ClientStream, error) {
	if x.cfg.Token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+x.cfg.Token)
	}
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method, grpc.WaitForReady(waitReady))
	if err != nil {
		return nil, err
	}
	h := hello{Version: wireVersion, Scheme: keyScheme, ID: x.id}
	if err := cs.SendMsg(&frame{b: h.encode()}); err != nil {
		return nil, err
	}
	return cs, cs.CloseSend()
}

// accept reads a stream's hello and checks the token and the versions.
func (x *Exchange) accept(ss grpc.ServerStream) (hello, error) {
	if x.cfg.Token != "" {
		md, _ := metadata.FromIncomingContext(ss.Context())
		got := ""
		if v := md.Get("authorization"); len(v) == 1 {
			got = strings.TrimPrefix(v[0], "Bearer ")
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(x.cfg.Token)) != 1 {
			x.c.rejected("unauthenticated")
			return hello{}, status.Error(codes.Unauthenticated, "peer token required")
		}
	}
	var f frame
	if err := ss.RecvMsg(&f); err != nil {
		return hello{}, err
	}
	h, err := decodeHello(f.b)
	switch {
	case err != nil:
		x.c.rejected("malformed")
		return hello{}, status.Error(codes.InvalidArgument, err.Error())
	case h.Version != wireVersion || h.Scheme != keyScheme:
		x.c.rejected("version")
		return hello{}, status.Errorf(codes.FailedPrecondition, "peer speaks wire version %d, key scheme %d; this replica %d, %d",
			h.Version, h.Scheme, wireVersion, keyScheme)
	case h.ID == x.id:
		return hello{}, status.Error(codes.FailedPrecondition, errSelf)
	}
	return h, nil
}

// errSelf is the answer to a replica that reached itself (a static list or
// a discovery that names it): it stops following that address.
const errSelf = "this is the asking replica itself"
