"""One rank of test_abort.py: attaches to the coordinator in $MEMCOORD_COORDINATOR, prints "ready", then
  victim    sleeps until killed;
  blocked   starts the abort watcher and blocks its main thread in a C call that never returns (a recv on a
            socket nobody writes to, as a rank waits inside a gloo collective);
  replaced  as blocked, but after the watcher started (as enable() starts it) watch_aborts(on_abort=...) gives it
            a handler of its own, which prints "custom handler: dead_rank=N" and exits 0;
  gil       as blocked, but the C call holds the interpreter lock (ctypes.PyDLL), so the watcher thread can never
            run: memcoord's own backstop (memcoord_set_abort_exit) must end the process;
  stepping  runs memcoord.step(on_abort="raise") steps until an AbortedError, prints it, exits 0;
  finisher  exits normally after 0.3 s;
  raiser    after 0.3 s dies of an uncaught ValueError("boom") (memcoord detaches as failed at exit);
  raiser_hooked  as raiser, under a sys.excepthook of the user's that only prints a line;
  exit3     after 0.3 s calls sys.exit(3);
  failer    after 0.3 s calls memcoord.fail("gave up on purpose"), then exits with 0;
  stepping_quiet  runs steps for 2 s and prints "no abort" (an AbortedError would end it with a traceback)."""

import os
import socket
import sys
import time

import memcoord  # the environment (MEMCOORD_COORDINATOR, MEMCOORD_RANK, ...) comes from test_abort.py

role = sys.argv[1]
memcoord.init()
if role in ("blocked", "replaced", "gil"):
    memcoord.watch_aborts(poll_ms=200)
if role == "replaced":
    def handler(facts):
        print(f"custom handler: dead_rank={facts.dead_rank}", flush=True)
        os._exit(0)

    memcoord.watch_aborts(on_abort=handler, poll_ms=100)
print("ready", flush=True)

if role == "victim":
    time.sleep(600)
elif role in ("blocked", "replaced"):
    a, b = socket.socketpair()
    a.recv(1)  # blocks in C until the watcher ends the process
    print("recv returned: the watcher did not end the process", flush=True)
    sys.exit(3)
elif role == "gil":
    import ctypes

    ctypes.PyDLL(None).sleep(60)  # libc sleep(3), called with the interpreter lock held
    print("sleep returned: nothing ended the process", flush=True)
    sys.exit(3)
elif role == "finisher":
    time.sleep(0.3)
    sys.exit(0)  # a normal end: memcoord detaches cleanly at exit
elif role in ("raiser", "raiser_hooked"):
    if role == "raiser_hooked":
        sys.excepthook = lambda exc_type, exc, tb: print(f"user hook saw {exc_type.__name__}", file=sys.stderr)
    time.sleep(0.3)
    raise ValueError("boom")
elif role == "exit3":
    time.sleep(0.3)
    sys.exit(3)
elif role == "failer":
    time.sleep(0.3)
    print(f"fail returned {memcoord.fail('gave up on purpose')}", flush=True)
    sys.exit(0)
elif role == "stepping_quiet":
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        with memcoord.step(on_abort="raise"):
            time.sleep(0.02)
    print("no abort", flush=True)
elif role == "stepping":
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with memcoord.step(on_abort="raise"):
                time.sleep(0.02)
        except memcoord.AbortedError as error:
            print(f"AbortedError dead_rank={error.dead_rank} reason={error.reason!r}", flush=True)
            sys.exit(0)
    print("no abort within 30 s", flush=True)
    sys.exit(4)
else:
    sys.exit(f"abort_rank.py: unknown role {role!r}; accepted: victim, blocked, replaced, gil, stepping, "
             "finisher, stepping_quiet, raiser, raiser_hooked, exit3, failer")
