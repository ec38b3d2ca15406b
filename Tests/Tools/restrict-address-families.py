#!/usr/bin/env python3
"""Runs a command with socket() refused (EAFNOSUPPORT) for every address family but the ones named,
as systemd's RestrictAddressFamilies= does (a seccomp filter on socket()'s first argument).

    restrict-address-families.py "AF_INET AF_INET6 AF_UNIX" -- COMMAND [ARGUMENT ...]

Used by DeployFilesTests to run a receiver under deploy/risc.service's list (systemd is not PID 1
on the test machine). x86-64 and AArch64 only: elsewhere it refuses to run, so that nothing passes
without the filter in place.
"""
import ctypes
import errno
import os
import platform
import socket
import struct
import sys

if len(sys.argv) < 4 or sys.argv[2] != "--":
    sys.exit("usage: restrict-address-families.py 'AF_INET AF_UNIX ...' -- COMMAND [ARGUMENT ...]")
allowed = [getattr(socket, name) for name in sys.argv[1].split()]
arch, socket_nr = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}.get(platform.machine(), (None, None))
if arch is None:
    sys.exit(f"restrict-address-families.py: no filter for {platform.machine()}")

LD_W_ABS, JEQ_K, RET_K = 0x20, 0x15, 0x06
ALLOW, ERRNO, KILL = 0x7FFF0000, 0x00050000, 0x80000000


def stmt(code, k):
    return struct.pack("HBBI", code, 0, 0, k)


def jump(code, k, jt, jf):
    return struct.pack("HBBI", code, jt, jf, k)


program = [
    stmt(LD_W_ABS, 4),  # seccomp_data.arch
    jump(JEQ_K, arch, 1, 0),
    stmt(RET_K, KILL),
    stmt(LD_W_ABS, 0),  # seccomp_data.nr
    jump(JEQ_K, socket_nr, 1, 0),
    stmt(RET_K, ALLOW),
    stmt(LD_W_ABS, 16),  # seccomp_data.args[0], its low 32 bits: the family
]
for index, family in enumerate(allowed):
    program.append(jump(JEQ_K, family, len(allowed) - index, 0))
program += [stmt(RET_K, ERRNO | errno.EAFNOSUPPORT), stmt(RET_K, ALLOW)]

code = b"".join(program)
buffer = ctypes.create_string_buffer(code)


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


libc = ctypes.CDLL(None, use_errno=True)
fprog = SockFprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
    sys.exit(f"restrict-address-families.py: seccomp: {os.strerror(ctypes.get_errno())}")
os.execvp(sys.argv[3], sys.argv[3:])
