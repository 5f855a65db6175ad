// The Go peer of goro's interop tests: the client side, on grpc-go (Debian's
// golang-google-grpc-dev), with the flags of grpc-go's interop client. It runs one test
// case of the gRPC interop test descriptions (grpc/grpc doc/interop-test-descriptions.md)
// against a server and exits 0 when every assertion of the case held, 1 otherwise
// (printing what differed). grpc/interop/run_interop.sh builds it offline in GOPATH mode.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	testpb "interop/proto/grpc/testing"
)

var (
	serverHost         = flag.String("server_host", "localhost", "the server's host")
	serverPort         = flag.Int("server_port", 10000, "the server's port")
	serverHostOverride = flag.String("server_host_override", "", "the name TLS verifies and :authority carries (default: --server_host)")
	testCase           = flag.String("test_case", "large_unary", "the test case to run")
	useTLS             = flag.Bool("use_tls", false, "connect with TLS instead of h2c")
	caFile             = flag.String("ca_file", "", "PEM file of the CA that signed the server's certificate")
	// Bounds every case, so that a server that never answers fails the case instead of
	// hanging the run.
	caseTimeout = flag.Duration("case_timeout", 10*time.Second, "deadline of each call of the case")
)

// failure ends the case: a test assertion that did not hold.
type failure string

func fail(format string, args ...interface{}) { panic(failure(fmt.Sprintf(format, args...))) }

func zeros(n int) *testpb.Payload {
	return &testpb.Payload{Type: testpb.PayloadType_COMPRESSABLE, Body: make([]byte, n)}
}

// checkPayload asserts a response payload of n zero bytes.
func checkPayload(what string, p *testpb.Payload, n int) {
	if p.GetType() != testpb.PayloadType_COMPRESSABLE {
		fail("%s: payload type %v, want COMPRESSABLE", what, p.GetType())
	}
	if len(p.GetBody()) != n {
		fail("%s: payload of %d bytes, want %d", what, len(p.GetBody()), n)
	}
	if !bytes.Equal(p.GetBody(), make([]byte, n)) {
		fail("%s: payload is not all zeros", what)
	}
}

// checkStatus asserts that err is a status with the code (and the message, when not nil).
func checkStatus(what string, err error, code codes.Code, message *string) {
	s, _ := status.FromError(err)
	if s.Code() != code {
		fail("%s: status %v (%q), want %v", what, s.Code(), s.Message(), code)
	}
	if message != nil && s.Message() != *message {
		fail("%s: status message %q, want %q", what, s.Message(), *message)
	}
}

func ok(what string, err error) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

var (
	requestSizes  = []int{27182, 8, 1828, 45904}
	responseSizes = []int{31415, 9, 2653, 58979}
)

type cases struct {
	conn *grpc.ClientConn
	tc   testpb.TestServiceClient
}

func (c cases) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), *caseTimeout)
}

func (c cases) emptyUnary() {
	ctx, cancel := c.ctx()
	defer cancel()
	reply, err := c.tc.EmptyCall(ctx, &testpb.Empty{})
	ok("EmptyCall", err)
	if reply == nil {
		fail("EmptyCall: nil reply")
	}
}

func (c cases) largeUnary() {
	ctx, cancel := c.ctx()
	defer cancel()
	reply, err := c.tc.UnaryCall(ctx, &testpb.SimpleRequest{
		ResponseType: testpb.PayloadType_COMPRESSABLE, ResponseSize: 314159, Payload: zeros(271828)})
	ok("UnaryCall", err)
	checkPayload("UnaryCall", reply.GetPayload(), 314159)
}

func (c cases) clientStreaming() {
	ctx, cancel := c.ctx()
	defer cancel()
	stream, err := c.tc.StreamingInputCall(ctx)
	ok("StreamingInputCall", err)
	sum := 0
	for _, n := range requestSizes {
		ok("Send", stream.Send(&testpb.StreamingInputCallRequest{Payload: zeros(n)}))
		sum += n
	}
	reply, err := stream.CloseAndRecv()
	ok("CloseAndRecv", err)
	if int(reply.GetAggregatedPayloadSize()) != sum {
		fail("aggregated_payload_size %d, want %d", reply.GetAggregatedPayloadSize(), sum)
	}
}

func outputRequest(reqSize int, respSizes ...int) *testpb.StreamingOutputCallRequest {
	req := &testpb.StreamingOutputCallRequest{ResponseType: testpb.PayloadType_COMPRESSABLE}
	if reqSize > 0 {
		req.Payload = zeros(reqSize)
	}
	for _, n := range respSizes {
		req.ResponseParameters = append(req.ResponseParameters, &testpb.ResponseParameters{Size: int32(n)})
	}
	return req
}

func (c cases) serverStreaming() {
	ctx, cancel := c.ctx()
	defer cancel()
	stream, err := c.tc.StreamingOutputCall(ctx, outputRequest(0, responseSizes...))
	ok("StreamingOutputCall", err)
	for i, n := range responseSizes {
		reply, err := stream.Recv()
		ok(fmt.Sprintf("Recv #%d", i), err)
		checkPayload(fmt.Sprintf("response #%d", i), reply.GetPayload(), n)
	}
	_, err = stream.Recv()
	if err != io.EOF {
		fail("after %d responses: %v, want the end of the stream", len(responseSizes), err)
	}
}

func (c cases) pingPong() {
	ctx, cancel := c.ctx()
	defer cancel()
	stream, err := c.tc.FullDuplexCall(ctx)
	ok("FullDuplexCall", err)
	for i := range requestSizes {
		ok("Send", stream.Send(outputRequest(requestSizes[i], responseSizes[i])))
		reply, err := stream.Recv()
		ok(fmt.Sprintf("Recv #%d", i), err)
		checkPayload(fmt.Sprintf("response #%d", i), reply.GetPayload(), responseSizes[i])
	}
	ok("CloseSend", stream.CloseSend())
	if _, err := stream.Recv(); err != io.EOF {
		fail("after the half-close: %v, want the end of the stream", err)
	}
}

func (c cases) emptyStream() {
	ctx, cancel := c.ctx()
	defer cancel()
	stream, err := c.tc.FullDuplexCall(ctx)
	ok("FullDuplexCall", err)
	ok("CloseSend", stream.CloseSend())
	if _, err := stream.Recv(); err != io.EOF {
		fail("Recv: %v, want the end of the stream", err)
	}
}

func (c cases) timeoutOnSleepingServer() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	stream, err := c.tc.FullDuplexCall(ctx)
	if err != nil {
		checkStatus("FullDuplexCall", err, codes.DeadlineExceeded, nil)
		return
	}
	// The send may already fail (io.EOF: the call is over); the status comes from Recv.
	if err := stream.Send(outputRequest(27182)); err != nil && err != io.EOF {
		checkStatus("Send", err, codes.DeadlineExceeded, nil)
	}
	_, err = stream.Recv()
	checkStatus("Recv", err, codes.DeadlineExceeded, nil)
}

func (c cases) cancelAfterBegin() {
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.tc.StreamingInputCall(ctx)
	ok("StreamingInputCall", err)
	cancel()
	_, err = stream.CloseAndRecv()
	checkStatus("CloseAndRecv", err, codes.Canceled, nil)
}

func (c cases) cancelAfterFirstResponse() {
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.tc.FullDuplexCall(ctx)
	ok("FullDuplexCall", err)
	ok("Send", stream.Send(outputRequest(27182, 31415)))
	reply, err := stream.Recv()
	ok("Recv", err)
	checkPayload("response", reply.GetPayload(), 31415)
	cancel()
	_, err = stream.Recv()
	checkStatus("Recv after cancel", err, codes.Canceled, nil)
}

func (c cases) echoStatus(message string, duplex bool) {
	ctx, cancel := c.ctx()
	defer cancel()
	want := &testpb.EchoStatus{Code: 2, Message: message}
	_, err := c.tc.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: want})
	checkStatus("UnaryCall", err, codes.Unknown, &message)
	if !duplex {
		return
	}
	stream, err := c.tc.FullDuplexCall(ctx)
	ok("FullDuplexCall", err)
	ok("Send", stream.Send(&testpb.StreamingOutputCallRequest{ResponseStatus: want}))
	ok("CloseSend", stream.CloseSend())
	_, err = stream.Recv()
	checkStatus("FullDuplexCall Recv", err, codes.Unknown, &message)
}

const (
	initialKey   = "x-grpc-test-echo-initial"
	initialValue = "test_initial_metadata_value"
	trailingKey  = "x-grpc-test-echo-trailing-bin"
	trailingVal  = "\xab\xab\xab"
)

func checkEchoed(what string, header, trailer metadata.MD) {
	if v := header.Get(initialKey); len(v) != 1 || v[0] != initialValue {
		fail("%s: initial metadata %s = %q, want [%q]", what, initialKey, v, initialValue)
	}
	if v := trailer.Get(trailingKey); len(v) != 1 || v[0] != trailingVal {
		fail("%s: trailing metadata %s = %q, want [%q]", what, trailingKey, v, trailingVal)
	}
}

func (c cases) customMetadata() {
	ctx, cancel := c.ctx()
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, initialKey, initialValue, trailingKey, trailingVal)
	var header, trailer metadata.MD
	reply, err := c.tc.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 314159, Payload: zeros(271828)},
		grpc.Header(&header), grpc.Trailer(&trailer))
	ok("UnaryCall", err)
	checkPayload("UnaryCall", reply.GetPayload(), 314159)
	checkEchoed("UnaryCall", header, trailer)

	stream, err := c.tc.FullDuplexCall(ctx)
	ok("FullDuplexCall", err)
	ok("Send", stream.Send(outputRequest(271828, 314159)))
	ok("CloseSend", stream.CloseSend())
	streamReply, err := stream.Recv()
	ok("Recv", err)
	checkPayload("FullDuplexCall", streamReply.GetPayload(), 314159)
	if _, err := stream.Recv(); err != io.EOF {
		fail("FullDuplexCall: %v, want the end of the stream", err)
	}
	header, err = stream.Header()
	ok("Header", err)
	checkEchoed("FullDuplexCall", header, stream.Trailer())
}

func (c cases) unimplementedMethod() {
	ctx, cancel := c.ctx()
	defer cancel()
	_, err := c.tc.UnimplementedCall(ctx, &testpb.Empty{})
	checkStatus("TestService/UnimplementedCall", err, codes.Unimplemented, nil)
}

func (c cases) unimplementedService() {
	ctx, cancel := c.ctx()
	defer cancel()
	_, err := testpb.NewUnimplementedServiceClient(c.conn).UnimplementedCall(ctx, &testpb.Empty{})
	checkStatus("UnimplementedService/UnimplementedCall", err, codes.Unimplemented, nil)
}

func main() {
	flag.Parse()
	var opts []grpc.DialOption
	if *useTLS {
		creds, err := credentials.NewClientTLSFromFile(*caFile, *serverHostOverride)
		if err != nil {
			fmt.Fprintf(os.Stderr, "TLS credentials: %v\n", err)
			os.Exit(2)
		}
		opts = append(opts, grpc.WithTransportCredentials(creds))
	} else {
		opts = append(opts, grpc.WithInsecure())
		if *serverHostOverride != "" {
			opts = append(opts, grpc.WithAuthority(*serverHostOverride))
		}
	}
	conn, err := grpc.Dial(net.JoinHostPort(*serverHost, strconv.Itoa(*serverPort)), opts...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dial: %v\n", err)
		os.Exit(1)
	}
	defer conn.Close()
	c := cases{conn: conn, tc: testpb.NewTestServiceClient(conn)}
	special := "\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP \U0001f608\t\n"
	table := map[string]func(){
		"empty_unary":                 c.emptyUnary,
		"large_unary":                 c.largeUnary,
		"client_streaming":            c.clientStreaming,
		"server_streaming":            c.serverStreaming,
		"ping_pong":                   c.pingPong,
		"empty_stream":                c.emptyStream,
		"timeout_on_sleeping_server":  c.timeoutOnSleepingServer,
		"cancel_after_begin":          c.cancelAfterBegin,
		"cancel_after_first_response": c.cancelAfterFirstResponse,
		"status_code_and_message":     func() { c.echoStatus("test status message", true) },
		"special_status_message":      func() { c.echoStatus(special, false) },
		"custom_metadata":             c.customMetadata,
		"unimplemented_method":        c.unimplementedMethod,
		"unimplemented_service":       c.unimplementedService,
	}
	run, found := table[*testCase]
	if !found {
		fmt.Fprintf(os.Stderr, "unknown test case %q\n", *testCase)
		os.Exit(2)
	}
	defer func() {
		if r := recover(); r != nil {
			f, isFailure := r.(failure)
			if !isFailure {
				panic(r)
			}
			fmt.Fprintf(os.Stderr, "%s: FAILED: %s\n", *testCase, f)
			os.Exit(1)
		}
	}()
	run()
	fmt.Printf("%s: passed\n", *testCase)
}
