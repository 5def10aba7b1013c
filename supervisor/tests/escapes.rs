//! Escapes that the seccomp deny list and the dropped privileges must stop,
//! tried by python3 inside the sandbox (through ctypes where Python has no
//! wrapper), and what the workload must see of its own confinement.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use common::{Dir, SYSTEM, TestNet, bundle, clients, output, stderr, stdout};

/// Runs a python3 snippet in a sandbox (as `nobody`); returns its stdout.
fn python(code: &str) -> String {
    let net = TestNet::new();
    let dir = Dir::new();
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  run_as user nobody group nogroup\n  binaries clients = {}\n",
        clients()
    );
    let bundle = bundle(&dir, "escapes", &body);
    let out = output(net.supervisor(
        &[
            "run",
            "--bundle",
            bundle.to_str().unwrap(),
            "--workdir",
            dir.path().to_str().unwrap(),
            "--",
            "/usr/bin/python3",
            "-c",
            &format!("import ctypes,os,socket\nlibc=ctypes.CDLL(None,use_errno=True)\n{code}"),
        ],
        None,
    ));
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

#[test]
fn raw_and_packet_sockets_fail() {
    let out = python(
        "for fam,ty,proto in ((socket.AF_INET,socket.SOCK_RAW,1),(socket.AF_INET6,socket.SOCK_RAW,58),(socket.AF_PACKET,socket.SOCK_RAW,0x300),(socket.AF_PACKET,socket.SOCK_DGRAM,0)):\n  try:\n    socket.socket(fam,ty,proto); print('opened')\n  except OSError as e:\n    print(e.errno)\n",
    );
    assert_eq!(out, "1\n1\n1\n1\n", "EPERM each time");
}

#[test]
fn io_uring_fails() {
    let out = python(
        "params=ctypes.create_string_buffer(120)\nr=libc.syscall(425,8,params)\nprint(r,ctypes.get_errno())\n",
    );
    assert_eq!(out, "-1 38\n", "ENOSYS");
}

#[test]
fn ptrace_of_another_process_fails() {
    let out = python(
        "pid=os.fork()\nif pid==0:\n  import time; time.sleep(30); os._exit(0)\nr=libc.ptrace(16,pid,0,0)\nprint(r,ctypes.get_errno())\nos.kill(pid,9)\n",
    );
    assert_eq!(out, "-1 1\n", "PTRACE_ATTACH: EPERM");
}

#[test]
fn the_workload_cannot_install_its_own_seccomp_listener() {
    // An allow-all program; SECCOMP_SET_MODE_FILTER with NEW_LISTENER.
    let out = python(
        "class F(ctypes.Structure): _fields_=[('code',ctypes.c_ushort),('jt',ctypes.c_ubyte),('jf',ctypes.c_ubyte),('k',ctypes.c_uint)]\nclass P(ctypes.Structure): _fields_=[('len',ctypes.c_ushort),('filter',ctypes.POINTER(F))]\nins=(F*1)(F(6,0,0,0x7fff0000))\nprog=P(1,ins)\nr=libc.syscall(317,1,8,ctypes.byref(prog))\nprint(r,ctypes.get_errno())\n",
    );
    assert_eq!(out, "-1 1\n", "EPERM");
}

#[test]
fn unshare_of_a_user_namespace_fails() {
    let out = python("r=libc.unshare(0x10000000)\nprint(r,ctypes.get_errno())\n");
    assert_eq!(out, "-1 1\n", "EPERM");
}

#[test]
fn no_new_privs_is_set_and_no_capability_is_left() {
    let out = python(
        "st=dict(l.split(':\\t',1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\nfor k in ('NoNewPrivs','CapInh','CapPrm','CapEff','CapBnd','CapAmb','Uid'):\n  print(k, st[k].split()[0])\n",
    );
    assert_eq!(
        out,
        "NoNewPrivs 1\nCapInh 0000000000000000\nCapPrm 0000000000000000\nCapEff 0000000000000000\nCapBnd 0000000000000000\nCapAmb 0000000000000000\nUid 65534\n"
    );
}
