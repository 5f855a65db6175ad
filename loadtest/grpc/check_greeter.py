#!/usr/bin/python3
"""One call of each greeter method with a real gRPC client (Debian's python3-grpcio),
for loadtest/run.sh before it measures a grpc-* step: the reply must be what
helloworld.proto says, so that h2load's counts (which cannot see grpc-status) are
counts of real answers.

    /usr/bin/python3 check_greeter.py HOST:PORT STREAM_REPLIES

Prints "ok: ..." and exits 0, or prints what was wrong and exits 1. The messages come
from protoc --python_out (the protoc of protobuf-compiler, the same version as Debian's
python3-protobuf), generated into a temporary folder.
"""

import os
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    target, stream_replies = sys.argv[1], int(sys.argv[2])
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as gen:
        subprocess.run(["protoc", f"-I{here}", f"--python_out={gen}", "helloworld.proto"],
                       check=True)
        sys.path.insert(0, gen)
        import grpc
        import helloworld_pb2 as pb

    request = pb.HelloRequest(name="world")
    with grpc.insecure_channel(target) as channel:
        say_hello = channel.unary_unary("/helloworld.Greeter/SayHello",
                                        request_serializer=pb.HelloRequest.SerializeToString,
                                        response_deserializer=pb.HelloReply.FromString)
        stream = channel.unary_stream("/helloworld.Greeter/SayHelloStreamReply",
                                      request_serializer=pb.HelloRequest.SerializeToString,
                                      response_deserializer=pb.HelloReply.FromString)
        try:
            reply, call = say_hello.with_call(request, timeout=5)
            if call.code() != grpc.StatusCode.OK or reply.message != "Hello world":
                print(f"SayHello: status {call.code()}, reply {reply.message!r}")
                return 1
            replies = stream(request, timeout=10)
            messages = [r.message for r in replies]
            if replies.code() != grpc.StatusCode.OK:
                print(f"SayHelloStreamReply: status {replies.code()}")
                return 1
            if messages != ["Hello world"] * stream_replies:
                print(f"SayHelloStreamReply: {len(messages)} replies, expected "
                      f"{stream_replies} of 'Hello world' (first: {messages[:1]!r})")
                return 1
        except grpc.RpcError as e:
            print(f"call failed: {e.code()}: {e.details()}")
            return 1
    print(f"ok: SayHello -> {reply.message!r}, SayHelloStreamReply -> "
          f"{len(messages)} x {messages[0] if messages else ''!r}, status OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
