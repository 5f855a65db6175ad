// goro::hooks — libc's blocking calls, made on a goroutine, park the goroutine instead
// of its thread.
//
// Linking the target goro::hooks is all it takes: the library defines socket, connect,
// accept, read, write, recv, send (and their variants), poll, ppoll, select, the sleeps,
// fcntl, ioctl(FIONBIO), setsockopt, close, dup/dup2/dup3 and the name lookups, in front of
// libc's. A C library's plain blocking calls (PQexec, hiredis' redisCommand,
// curl_easy_perform) then run on goroutines as goro's own sockets do: the goroutine
// parks on the netpoller or a timer, its P runs the others.
//
// On a goroutine, for a socket made through the hooks and left blocking by its user, a
// call that would block parks the goroutine; SO_RCVTIMEO / SO_SNDTIMEO bound the wait
// as they bound the kernel's, a close of the socket by another goroutine ends it with
// EBADF, and fcntl(F_GETFL) reports O_NONBLOCK as the user set it. Everything else is
// libc's call, unchanged: a caller that is not a goroutine (before or after goro::run,
// a thread of the program's own), a descriptor the user made non-blocking, a file or a
// pipe. The sleeps park on a timer; poll and select park on the descriptors they name;
// name lookups run inside goro::blocking. docs/hooks.md has the rules and the limits.
//
// Nothing needs including to use the hooks; this header only answers whether they are
// in the program. A program that did not link them can take them at start from
// libgoro_hooks.so with LD_PRELOAD, if it was linked with goro::hooks_preloadable
// (docs/hooks.md, "LD_PRELOAD").
#pragma once

namespace goro::hooks {

// True: the hooks are linked into this program.
bool linked() noexcept;

}  // namespace goro::hooks
