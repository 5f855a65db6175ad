#!/usr/bin/python3
"""The Python peer of goro's interop tests: the client side, on python3-grpcio.

Runs one test case of the gRPC interop test descriptions (grpc/grpc doc/
interop-test-descriptions.md) against a server, with the flags of grpc-go's interop
client, and exits 0 when every assertion of the case held, 1 otherwise (printing what
differed). grpc/interop/run_interop.sh generates the stubs and puts them on PYTHONPATH.
"""

import argparse
import queue
import sys

import grpc

from proto.grpc.testing import empty_pb2, messages_pb2, test_pb2_grpc

REQUEST_SIZES = [27182, 8, 1828, 45904]
RESPONSE_SIZES = [31415, 9, 2653, 58979]
INITIAL_KEY, INITIAL_VALUE = "x-grpc-test-echo-initial", "test_initial_metadata_value"
TRAILING_KEY, TRAILING_VALUE = "x-grpc-test-echo-trailing-bin", b"\xab\xab\xab"
# Bounds every call, so that a server that never answers fails the case instead of
# hanging the run.
CALL_TIMEOUT = 10


class Failure(Exception):
    """A test assertion that did not hold."""


def check(condition, message):
    if not condition:
        raise Failure(message)


def zeros(n):
    return messages_pb2.Payload(type=messages_pb2.COMPRESSABLE, body=bytes(n))


def check_payload(what, payload, n):
    check(payload.type == messages_pb2.COMPRESSABLE, f"{what}: payload type {payload.type}")
    check(len(payload.body) == n, f"{what}: payload of {len(payload.body)} bytes, want {n}")
    check(payload.body == bytes(n), f"{what}: payload is not all zeros")


def output_request(request_size, *response_sizes):
    request = messages_pb2.StreamingOutputCallRequest(response_type=messages_pb2.COMPRESSABLE)
    if request_size:
        request.payload.CopyFrom(zeros(request_size))
    for n in response_sizes:
        request.response_parameters.add(size=n)
    return request


class Requests:
    """A request stream the test feeds one message at a time (close() half-closes)."""

    _END = object()

    def __init__(self):
        self._queue = queue.Queue()

    def send(self, request):
        self._queue.put(request)

    def close(self):
        self._queue.put(self._END)

    def __iter__(self):
        return self

    def __next__(self):
        item = self._queue.get()
        if item is self._END:
            raise StopIteration
        return item


def expect_code(what, call_or_error, code, message=None):
    got = call_or_error.code()
    check(got == code, f"{what}: status {got} ({call_or_error.details()!r}), want {code}")
    if message is not None:
        details = call_or_error.details()
        check(details == message, f"{what}: status message {details!r}, want {message!r}")


def expect_end(what, responses):
    try:
        response = next(responses)
    except StopIteration:
        return
    raise Failure(f"{what}: another response ({len(response.payload.body)} bytes), want the end")


def empty_unary(stub, channel):
    response = stub.EmptyCall(empty_pb2.Empty(), timeout=CALL_TIMEOUT)
    check(isinstance(response, empty_pb2.Empty), "EmptyCall: no Empty reply")


def large_unary(stub, channel):
    request = messages_pb2.SimpleRequest(
        response_type=messages_pb2.COMPRESSABLE, response_size=314159, payload=zeros(271828))
    response = stub.UnaryCall(request, timeout=CALL_TIMEOUT)
    check_payload("UnaryCall", response.payload, 314159)


def client_streaming(stub, channel):
    requests = (messages_pb2.StreamingInputCallRequest(payload=zeros(n)) for n in REQUEST_SIZES)
    response = stub.StreamingInputCall(requests, timeout=CALL_TIMEOUT)
    check(response.aggregated_payload_size == sum(REQUEST_SIZES),
          f"aggregated_payload_size {response.aggregated_payload_size}, want {sum(REQUEST_SIZES)}")


def server_streaming(stub, channel):
    responses = stub.StreamingOutputCall(output_request(0, *RESPONSE_SIZES), timeout=CALL_TIMEOUT)
    for i, n in enumerate(RESPONSE_SIZES):
        check_payload(f"response #{i}", next(responses).payload, n)
    expect_end("StreamingOutputCall", responses)
    expect_code("StreamingOutputCall", responses, grpc.StatusCode.OK)


def ping_pong(stub, channel):
    requests = Requests()
    responses = stub.FullDuplexCall(requests, timeout=CALL_TIMEOUT)
    for i, (request_size, response_size) in enumerate(zip(REQUEST_SIZES, RESPONSE_SIZES)):
        requests.send(output_request(request_size, response_size))
        check_payload(f"response #{i}", next(responses).payload, response_size)
    requests.close()
    expect_end("FullDuplexCall", responses)
    expect_code("FullDuplexCall", responses, grpc.StatusCode.OK)


def empty_stream(stub, channel):
    responses = stub.FullDuplexCall(iter(()), timeout=CALL_TIMEOUT)
    expect_end("FullDuplexCall", responses)
    expect_code("FullDuplexCall", responses, grpc.StatusCode.OK)


def timeout_on_sleeping_server(stub, channel):
    requests = Requests()
    requests.send(output_request(27182))
    responses = stub.FullDuplexCall(requests, timeout=0.001)
    try:
        next(responses)
        raise Failure("FullDuplexCall: a response, want DEADLINE_EXCEEDED")
    except grpc.RpcError as error:
        expect_code("FullDuplexCall", error, grpc.StatusCode.DEADLINE_EXCEEDED)
    finally:
        requests.close()


def cancel_after_begin(stub, channel):
    requests = Requests()
    future = stub.StreamingInputCall.future(requests, timeout=CALL_TIMEOUT)
    future.cancel()
    requests.close()
    check(future.cancelled(), "StreamingInputCall: not cancelled")
    expect_code("StreamingInputCall", future, grpc.StatusCode.CANCELLED)


def cancel_after_first_response(stub, channel):
    requests = Requests()
    responses = stub.FullDuplexCall(requests, timeout=CALL_TIMEOUT)
    requests.send(output_request(27182, 31415))
    check_payload("response", next(responses).payload, 31415)
    responses.cancel()
    requests.close()
    try:
        next(responses)
        raise Failure("FullDuplexCall: a response after cancel")
    except grpc.RpcError as error:
        expect_code("FullDuplexCall", error, grpc.StatusCode.CANCELLED)


def echo_status(stub, message, duplex):
    status = messages_pb2.EchoStatus(code=2, message=message)
    try:
        stub.UnaryCall(messages_pb2.SimpleRequest(response_status=status), timeout=CALL_TIMEOUT)
        raise Failure("UnaryCall: OK, want UNKNOWN")
    except grpc.RpcError as error:
        expect_code("UnaryCall", error, grpc.StatusCode.UNKNOWN, message)
    if not duplex:
        return
    request = messages_pb2.StreamingOutputCallRequest(response_status=status)
    responses = stub.FullDuplexCall(iter([request]), timeout=CALL_TIMEOUT)
    try:
        next(responses)
        raise Failure("FullDuplexCall: a response, want UNKNOWN")
    except grpc.RpcError as error:
        expect_code("FullDuplexCall", error, grpc.StatusCode.UNKNOWN, message)


def status_code_and_message(stub, channel):
    echo_status(stub, "test status message", True)


def special_status_message(stub, channel):
    echo_status(stub, "\t\ntest with whitespace\r\nand Unicode BMP \u263a and non-BMP \U0001f608\t\n",
                False)


def check_echoed(what, initial, trailing):
    initial, trailing = dict(initial or ()), dict(trailing or ())
    check(initial.get(INITIAL_KEY) == INITIAL_VALUE,
          f"{what}: initial metadata {INITIAL_KEY} = {initial.get(INITIAL_KEY)!r}")
    check(trailing.get(TRAILING_KEY) == TRAILING_VALUE,
          f"{what}: trailing metadata {TRAILING_KEY} = {trailing.get(TRAILING_KEY)!r}")


def custom_metadata(stub, channel):
    metadata = ((INITIAL_KEY, INITIAL_VALUE), (TRAILING_KEY, TRAILING_VALUE))
    request = messages_pb2.SimpleRequest(response_size=314159, payload=zeros(271828))
    response, call = stub.UnaryCall.with_call(request, metadata=metadata, timeout=CALL_TIMEOUT)
    check_payload("UnaryCall", response.payload, 314159)
    check_echoed("UnaryCall", call.initial_metadata(), call.trailing_metadata())

    responses = stub.FullDuplexCall(iter([output_request(271828, 314159)]), metadata=metadata,
                                    timeout=CALL_TIMEOUT)
    check_payload("FullDuplexCall", next(responses).payload, 314159)
    expect_end("FullDuplexCall", responses)
    check_echoed("FullDuplexCall", responses.initial_metadata(), responses.trailing_metadata())


def unimplemented_method(stub, channel):
    try:
        stub.UnimplementedCall(empty_pb2.Empty(), timeout=CALL_TIMEOUT)
        raise Failure("TestService/UnimplementedCall: OK, want UNIMPLEMENTED")
    except grpc.RpcError as error:
        expect_code("TestService/UnimplementedCall", error, grpc.StatusCode.UNIMPLEMENTED)


def unimplemented_service(stub, channel):
    other = test_pb2_grpc.UnimplementedServiceStub(channel)
    try:
        other.UnimplementedCall(empty_pb2.Empty(), timeout=CALL_TIMEOUT)
        raise Failure("UnimplementedService/UnimplementedCall: OK, want UNIMPLEMENTED")
    except grpc.RpcError as error:
        expect_code("UnimplementedService/UnimplementedCall", error, grpc.StatusCode.UNIMPLEMENTED)


CASES = {f.__name__: f for f in (
    empty_unary, large_unary, client_streaming, server_streaming, ping_pong, empty_stream,
    timeout_on_sleeping_server, cancel_after_begin, cancel_after_first_response,
    status_code_and_message, special_status_message, custom_metadata, unimplemented_method,
    unimplemented_service)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server_host", default="localhost")
    parser.add_argument("--server_port", type=int, default=10000)
    parser.add_argument("--server_host_override", default="")
    parser.add_argument("--test_case", default="large_unary", choices=sorted(CASES))
    parser.add_argument("--use_tls", default="false", choices=["true", "false"])
    parser.add_argument("--ca_file", default="")
    args = parser.parse_args()

    target = f"{args.server_host}:{args.server_port}"
    options = []
    if args.server_host_override:
        options.append(("grpc.ssl_target_name_override", args.server_host_override))
        options.append(("grpc.default_authority", args.server_host_override))
    if args.use_tls == "true":
        root = None
        if args.ca_file:
            with open(args.ca_file, "rb") as f:
                root = f.read()
        channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(root), options)
    else:
        channel = grpc.insecure_channel(target, options)
    with channel:
        stub = test_pb2_grpc.TestServiceStub(channel)
        try:
            CASES[args.test_case](stub, channel)
        except (Failure, grpc.RpcError) as error:
            if isinstance(error, grpc.RpcError):
                error = f"unexpected status {error.code()}: {error.details()!r}"
            print(f"{args.test_case}: FAILED: {error}", file=sys.stderr)
            return 1
    print(f"{args.test_case}: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
