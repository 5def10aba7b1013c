//! Escapes that the seccomp deny list and the dropped privileges must stop,
//! tried by python3 inside the sandbox (through ctypes where Python has no
//! wrapper), and what the workload must see of its own confinement.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::process::Command;

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

/// Each blocked family or call, tried by python3 through ctypes: vsock
/// (40), AF_ALG (38), AF_KEY (15), `bpf` (an unknown command), `mount`
/// (`MS_NOUSER`, which the kernel answers `EINVAL` before any permission
/// check), `process_vm_readv` of itself and `TIOCSTI` on its own
/// controlling terminal (a pty). Prints `name errno` (0: it worked).
/// x86_64 numbers.
const BLOCKED: &str = "import ctypes,os,socket,fcntl,termios,pty\nlibc=ctypes.CDLL(None,use_errno=True)\ndef r(name,f):\n  try:\n    f(); print(name,0)\n  except OSError as e:\n    print(name,e.errno)\ndef c(ret):\n  if ret<0: raise OSError(ctypes.get_errno(),'call')\nr('vsock',lambda: socket.socket(40,socket.SOCK_STREAM,0).close())\nr('alg',lambda: socket.socket(38,socket.SOCK_SEQPACKET,0).close())\nr('key',lambda: socket.socket(15,socket.SOCK_RAW,2).close())\nr('bpf',lambda: c(libc.syscall(321,9999,0,0)))\nr('mount',lambda: c(libc.mount(b'none',b'/',b'none',ctypes.c_ulong(1<<31),None)))\nclass IOV(ctypes.Structure): _fields_=[('base',ctypes.c_void_p),('len',ctypes.c_size_t)]\nsrc=ctypes.create_string_buffer(b'secret',8); dst=ctypes.create_string_buffer(8)\nr('process_vm_readv',lambda: c(libc.process_vm_readv(os.getpid(),ctypes.byref(IOV(ctypes.addressof(dst),8)),1,ctypes.byref(IOV(ctypes.addressof(src),8)),1,0)))\nrd,wr=os.pipe()\npid,master=pty.fork()\nif pid==0:\n  try:\n    fcntl.ioctl(0,termios.TIOCSTI,b'x'); e=0\n  except OSError as x:\n    e=x.errno\n  os.write(wr,str(e).encode()); os._exit(0)\nos.close(wr); print('tiocsti',os.read(rd,16).decode()); os.waitpid(pid,0)\n";

/// The errno the bundle's deny list gives `syscall` (its first rule).
fn bundle_errno(syscall: &str) -> i32 {
    let rule = policy_bundle::kernel::deny_list()
        .into_iter()
        .find(|d| d.syscall == syscall)
        .unwrap();
    enforcer::Errno::from_name(&rule.errno).unwrap().raw()
}

/// The blocked families and calls are refused by the real supervisor
/// with the errno the bundle names, for a root workload (no `run_as`),
/// where the kernel alone answers otherwise: the same probe run as root
/// without capabilities and without the sandbox opens the vsock socket,
/// reads its own memory and types into its terminal, and gets
/// `EAFNOSUPPORT`/`EINVAL` for the rest (no AF_ALG or AF_KEY here; an
/// unknown `bpf` command; `MS_NOUSER`).
#[test]
#[cfg(target_arch = "x86_64")]
fn blocked_families_and_calls_are_refused_with_the_bundles_errno_for_a_root_workload() {
    let net = TestNet::new();
    let dir = Dir::new();
    let calls = [
        ("vsock", "socket"),
        ("alg", "socket"),
        ("key", "socket"),
        ("bpf", "bpf"),
        ("mount", "mount"),
        ("process_vm_readv", "process_vm_readv"),
        ("tiocsti", "ioctl"),
    ];
    let control = Command::new("ip")
        .args(["netns", "exec", &net.name, "setpriv", "--bounding-set=-all"])
        .args(["--inh-caps=-all", "/usr/bin/python3", "-c", BLOCKED])
        .output()
        .unwrap();
    let control = stdout(&control);
    for ((name, syscall), line) in calls.iter().zip(control.lines()) {
        let (got, errno) = line.split_once(' ').unwrap();
        assert_eq!(got, *name, "{control}");
        assert_ne!(
            errno.parse::<i32>().unwrap(),
            bundle_errno(syscall),
            "the kernel alone already answers the bundle's errno: {control}"
        );
    }
    // A pty for the `TIOCSTI` attempt.
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  fs write /dev/ptmx /dev/pts\n  binaries clients = {}\n",
        clients()
    );
    let bundle = bundle(&dir, "blocked", &body);
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
            BLOCKED,
        ],
        None,
    ));
    assert!(out.status.success(), "{}", stderr(&out));
    let expected: String = calls
        .iter()
        .map(|(name, syscall)| format!("{name} {}\n", bundle_errno(syscall)))
        .collect();
    assert_eq!(stdout(&out), expected, "{}", stderr(&out));
}
