// The Go peer of goro's interop tests: grpc.testing.TestService served by grpc-go (Debian's
// golang-google-grpc-dev), with the flags of grpc-go's interop server. Debian ships no
// interop binaries, so grpc/interop/run_interop.sh builds this file offline in GOPATH mode,
// with the Go stubs it generates from grpc/interop/proto into the import path
// interop/proto/grpc/testing.
//
// Behaviour follows the interop test descriptions (grpc/grpc doc/
// interop-test-descriptions.md, "Server"): responses carry payloads of zero bytes of the
// requested sizes; a request's response_status becomes the call's status; the metadata
// keys x-grpc-test-echo-initial and x-grpc-test-echo-trailing-bin are echoed in the
// response headers and trailers; UnimplementedMethod and UnimplementedService are left
// unimplemented.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	testpb "interop/proto/grpc/testing"
)

var (
	port        = flag.Int("port", 10000, "the port to listen on (0: any; the port is printed)")
	useTLS      = flag.Bool("use_tls", false, "serve TLS instead of h2c")
	tlsCertFile = flag.String("tls_cert_file", "", "the TLS certificate (PEM)")
	tlsKeyFile  = flag.String("tls_key_file", "", "the TLS private key (PEM)")
)

const (
	echoInitialKey  = "x-grpc-test-echo-initial"
	echoTrailingKey = "x-grpc-test-echo-trailing-bin"
)

type testServer struct {
	testpb.UnimplementedTestServiceServer
}

// zeroPayload is a COMPRESSABLE payload of size zero bytes.
func zeroPayload(size int32) (*testpb.Payload, error) {
	if size < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "negative payload size %d", size)
	}
	return &testpb.Payload{Type: testpb.PayloadType_COMPRESSABLE, Body: make([]byte, size)}, nil
}

// echoStatus is the error a request's response_status asks for (nil for none or OK).
func echoStatus(s *testpb.EchoStatus) error {
	if s == nil || s.Code == 0 {
		return nil
	}
	return status.Error(codes.Code(s.Code), s.Message)
}

// echoMetadata copies the echo keys of the client's metadata to the response headers
// (sent now) and trailers.
func echoMetadata(ctx context.Context, sendHeader func(metadata.MD) error, setTrailer func(metadata.MD)) error {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(echoInitialKey); len(v) > 0 {
		if err := sendHeader(metadata.Pairs(echoInitialKey, v[0])); err != nil {
			return err
		}
	}
	if v := md.Get(echoTrailingKey); len(v) > 0 {
		setTrailer(metadata.Pairs(echoTrailingKey, v[0]))
	}
	return nil
}

func (testServer) EmptyCall(ctx context.Context, _ *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

func (testServer) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	err := echoMetadata(ctx, func(md metadata.MD) error { return grpc.SendHeader(ctx, md) },
		func(md metadata.MD) { grpc.SetTrailer(ctx, md) })
	if err != nil {
		return nil, err
	}
	if err := echoStatus(req.ResponseStatus); err != nil {
		return nil, err
	}
	payload, err := zeroPayload(req.ResponseSize)
	if err != nil {
		return nil, err
	}
	return &testpb.SimpleResponse{Payload: payload}, nil
}

// CacheableUnaryCall answers with the current time, so that two answers differ unless a
// caching proxy served the second.
func (testServer) CacheableUnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	body := []byte(fmt.Sprint(time.Now().UnixNano()))
	grpc.SetHeader(ctx, metadata.Pairs("cache-control", "max-age=60, public"))
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: body}}, nil
}

// sendResponses sends one response per parameter, each after its interval.
func sendResponses(ctx context.Context, params []*testpb.ResponseParameters,
	send func(*testpb.StreamingOutputCallResponse) error) error {
	for _, p := range params {
		if p.IntervalUs > 0 {
			select {
			case <-time.After(time.Duration(p.IntervalUs) * time.Microsecond):
			case <-ctx.Done():
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		payload, err := zeroPayload(p.Size)
		if err != nil {
			return err
		}
		if err := send(&testpb.StreamingOutputCallResponse{Payload: payload}); err != nil {
			return err
		}
	}
	return nil
}

func (testServer) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream testpb.TestService_StreamingOutputCallServer) error {
	if err := echoStatus(req.ResponseStatus); err != nil {
		return err
	}
	return sendResponses(stream.Context(), req.ResponseParameters, stream.Send)
}

func (testServer) StreamingInputCall(stream testpb.TestService_StreamingInputCallServer) error {
	var sum int32
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: sum})
		}
		if err != nil {
			return err
		}
		sum += int32(len(req.GetPayload().GetBody()))
	}
}

func (testServer) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	if err := echoMetadata(stream.Context(), stream.SendHeader, stream.SetTrailer); err != nil {
		return err
	}
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := echoStatus(req.ResponseStatus); err != nil {
			return err
		}
		if err := sendResponses(stream.Context(), req.ResponseParameters, stream.Send); err != nil {
			return err
		}
	}
}

func (testServer) HalfDuplexCall(stream testpb.TestService_HalfDuplexCallServer) error {
	var reqs []*testpb.StreamingOutputCallRequest
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		reqs = append(reqs, req)
	}
	for _, req := range reqs {
		if err := sendResponses(stream.Context(), req.ResponseParameters, stream.Send); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	flag.Parse()
	var opts []grpc.ServerOption
	if *useTLS {
		creds, err := credentials.NewServerTLSFromFile(*tlsCertFile, *tlsKeyFile)
		if err != nil {
			log.Fatalf("TLS credentials: %v", err)
		}
		opts = append(opts, grpc.Creds(creds))
	}
	lis, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	server := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(server, &testServer{})
	// The driver waits for this line to learn the port (with --port=0) and readiness.
	fmt.Printf("listening on port %d\n", lis.Addr().(*net.TCPAddr).Port)
	if err := server.Serve(lis); err != nil {
		log.Fatalf("serve: %v", err)
	}
}
