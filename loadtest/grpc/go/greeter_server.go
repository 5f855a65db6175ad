// The grpc-go greeter of the grpc-* load-test scenarios (loadtest/run.sh): grpc-go as
// its users write a server, with Debian's golang-google-grpc-dev (1.33) and stubs made
// by protoc-gen-go 1.3 with plugins=grpc (Debian's protoc-gen-go-1-3). run.sh builds it
// offline in GOPATH mode, the generated package at goro/loadtest/grpc/helloworld in a
// GOPATH of its own.
//
//	GOMAXPROCS=1 greeter_server -addr 127.0.0.1:50051 -stream-replies 100
//
// Default server options: the comparison is with grpc-go as it ships.
package main

import (
	"context"
	"flag"
	"log"
	"net"

	pb "goro/loadtest/grpc/helloworld"

	"google.golang.org/grpc"
)

type greeter struct {
	pb.UnimplementedGreeterServer
	streamReplies int
}

func (g *greeter) SayHello(_ context.Context, req *pb.HelloRequest) (*pb.HelloReply, error) {
	return &pb.HelloReply{Message: "Hello " + req.GetName()}, nil
}

func (g *greeter) SayHelloStreamReply(req *pb.HelloRequest, stream pb.Greeter_SayHelloStreamReplyServer) error {
	reply := &pb.HelloReply{Message: "Hello " + req.GetName()}
	for i := 0; i < g.streamReplies; i++ {
		if err := stream.Send(reply); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:50051", "address to listen on (h2c)")
	streamReplies := flag.Int("stream-replies", 100, "replies per SayHelloStreamReply call")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("listen %s: %v", *addr, err)
	}
	server := grpc.NewServer()
	pb.RegisterGreeterServer(server, &greeter{streamReplies: *streamReplies})
	log.Printf("grpc-go greeter on %s", ln.Addr())
	if err := server.Serve(ln); err != nil {
		log.Fatalf("serve: %v", err)
	}
}
