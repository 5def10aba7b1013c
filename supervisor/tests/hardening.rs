//! Kernel-facing escapes: each test is an attack the workload makes (in
//! python3, through ctypes where Python has no wrapper) and must lose,
//! against the real kernel.
//!
//! - a datagram whose address says `AF_UNSPEC`, sent on a socket of the
//!   host's namespace that another process passed in (`SCM_RIGHTS`);
//! - `/proc/self` (and its kin) in a rule, opened by the supervisor, would
//!   name its own `/proc` entries; a pid or a magic link in a rule;
//! - file metadata (modes, setuid bits, owners, times, extended
//!   attributes), which Landlock does not mediate;
//! - `listen` without `bind`, which binds a port Landlock never checked;
//! - uid 0 by default, and root-owned unix sockets.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    Dir, SUPERVISOR, SYSTEM, TestNet, bundle, clients, log_lines, output, stderr, stdout,
};

const PRELUDE: &str = "import ctypes,os,socket,stat,struct,sys,time\nlibc=ctypes.CDLL(None,use_errno=True)\ndef r(name,f):\n  try:\n    f(); print(name,0)\n  except OSError as e:\n    print(name,e.errno)\ndef sc(*a):\n  if libc.syscall(*a)<0: raise OSError(ctypes.get_errno(),'syscall')\n";

/// A bundle with the system paths, `extra` lines and the test clients.
fn policy(dir: &Dir, name: &str, extra: &str) -> PathBuf {
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}{extra}  binaries clients = {}\n",
        clients()
    );
    bundle(dir, name, &body)
}

/// The `run` arguments for python3 running `code` after [`PRELUDE`].
fn python_args(dir: &Dir, bundle: &Path, extra: &[&str], code: &str) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "run".into(),
        "--bundle".into(),
        bundle.to_str().unwrap().into(),
        "--workdir".into(),
        dir.path().to_str().unwrap().into(),
        "--log".into(),
        dir.log().to_str().unwrap().into(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args.extend(["--", "/usr/bin/python3", "-c"].map(String::from));
    args.push(format!("{PRELUDE}{code}"));
    args
}

fn run_python(net: &TestNet, dir: &Dir, bundle: &Path, extra: &[&str], code: &str) -> String {
    let args = python_args(dir, bundle, extra, code);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = output(net.supervisor(&args, None));
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
}

fn denied(dir: &Dir, syscall: &str) -> Vec<serde_json::Value> {
    log_lines(&dir.log())
        .into_iter()
        .filter(|l| l["action"] == "Denied" && l["unmapped"]["syscall"] == syscall)
        .collect()
}

/// Waits (one minute at most) until `path` exists.
fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < Duration::from_secs(60), "no {path:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---- item 1: AF_UNSPEC on a host socket passed in ----

/// Hands two UDP sockets of the test's (the supervisor's, the "host")
/// namespace, one IPv4 and one dual-stack IPv6, to whoever connects to
/// the unix socket at argv[1], then waits until that peer is done.
const FD_SERVER: &str = "import os,socket,sys\npath=sys.argv[1]\nu4=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); u4.bind(('0.0.0.0',0))\nu6=socket.socket(socket.AF_INET6,socket.SOCK_DGRAM); u6.bind(('::',0))\nsrv=socket.socket(socket.AF_UNIX); srv.bind(path); os.chmod(path,0o777); srv.listen(1)\nprint('ready',flush=True)\nc,_=srv.accept()\nsocket.send_fds(c,[b'fds'],[u4.fileno(),u6.fileno()])\nc.recv(1)\n";

#[test]
fn a_datagram_tagged_af_unspec_on_a_passed_in_host_socket_does_not_leave() {
    let (net, dir) = (TestNet::new(), Dir::new());
    // What would receive the datagrams: a listener the test owns on the
    // supervisor's (host) loopback.
    let trap = net.udp("127.0.0.1:0");
    trap.set_nonblocking(true).unwrap();
    let port = trap.local_addr().unwrap().port();
    let path = dir.join("fds.sock");
    let mut server = Command::new("ip")
        .args([
            "netns",
            "exec",
            &net.name,
            "/usr/bin/python3",
            "-c",
            FD_SERVER,
        ])
        .arg(&path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(server.stdout.as_mut().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready, "ready\n");
    let b = policy(&dir, "unspec", "  run_as user nobody group nogroup\n");
    let code = format!(
        "s=socket.socket(socket.AF_UNIX); s.connect({path:?})\n_,fds,_,_=socket.recv_fds(s,16,2)\nu4,u6=fds\ndef addr(fam): return struct.pack('=H',fam)+struct.pack('!H',{port})+socket.inet_aton('127.0.0.1')+bytes(8)\ndef send(fd,a):\n  n=libc.sendto(fd,b'leak',4,0,a,len(a)); print(n,ctypes.get_errno() if n<0 else 0)\nsend(u4,addr(0))\nsend(u4,addr(2))\nsend(u6,addr(2))\nsend(u6,addr(0))\ns.send(b'x')\n"
    );
    let out = run_python(&net, &dir, &b, &[], &code);
    let _ = server.wait();
    // AF_UNSPEC and AF_INET on the IPv4 socket, AF_INET on the IPv6 one
    // (sent over IPv4 by the kernel): refused. AF_UNSPEC on an IPv6 socket
    // is "no address", and this socket has no peer: the kernel's own
    // EDESTADDRREQ, nothing sent. Across hosts no IP send is left to the
    // kernel: that one is refused too.
    let (last, refused) = if common::two_hosts() {
        (13, 4)
    } else {
        (89, 3)
    };
    assert_eq!(out, format!("-1 13\n-1 13\n-1 13\n-1 {last}\n"));
    let mut buf = [0_u8; 16];
    let got = trap.recv_from(&mut buf);
    assert!(
        matches!(&got, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a datagram arrived: {got:?}"
    );
    let lines = denied(&dir, "sendto");
    assert_eq!(lines.len(), refused, "{lines:?}");
    for l in &lines {
        assert_eq!(l["dst_endpoint"]["ip"], "127.0.0.1", "{l}");
        assert_eq!(l["dst_endpoint"]["port"], port, "{l}");
        // Across hosts every send to an address is refused, for that
        // reason; locally, for the socket's namespace.
        let why = if common::two_hosts() {
            "a send to an address cannot be let through"
        } else {
            "not created in the sandbox's network namespace"
        };
        assert!(l["message"].as_str().unwrap().contains(why), "{l}");
    }
}

// ---- item 2: /proc/self and friends ----

#[test]
fn proc_self_means_the_workloads_own_entries_never_the_supervisors() {
    let (net, dir) = (TestNet::new(), Dir::new());
    // A listener of the supervisor's namespace: in its net/tcp, never in
    // the workload's.
    let host = net.tcp("127.0.0.1:0");
    let hex_port = format!(":{:04X} ", host.local_addr().unwrap().port());
    // No rule on /proc as a whole: only the links to the caller's entries.
    let body = format!(
        "  landlock hard min_abi 4\n  fs exec /usr /lib /lib64 /bin /etc\n  fs read /proc/self /proc/thread-self /proc/net /dev/urandom\n  fs write /dev/null\n  run_as user nobody group nogroup\n  binaries clients = {}\n",
        clients()
    );
    let b = bundle(&dir, "procself", &body);
    let code = format!(
        "r('self/status',lambda: open('/proc/self/status').read())\nr('thread-self/status',lambda: open('/proc/thread-self/status').read())\nown=open('/proc/self/net/tcp').read()+open('/proc/net/tcp').read()\nprint('host listener seen',{hex_port:?} in own)\nppid=os.getppid()\nfor f in ('net/tcp','net/unix','net/route','cmdline','mountinfo'):\n  r('supervisor/'+f,lambda: open('/proc/%d/%s'%(ppid,f)).read())\nimport subprocess\nsubprocess.run([sys.executable,'-c','open(\"/proc/self/status\")'],stderr=subprocess.DEVNULL).returncode and print('child refused its own')\n"
    );
    let out = run_python(&net, &dir, &b, &[], &code);
    assert_eq!(
        out,
        "self/status 0\nthread-self/status 0\nhost listener seen False\nsupervisor/net/tcp 13\nsupervisor/net/unix 13\nsupervisor/net/route 13\nsupervisor/cmdline 13\nsupervisor/mountinfo 13\nchild refused its own\n"
    );
}

#[test]
fn the_workload_sees_only_its_own_pid_namespace_in_proc() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let b = policy(&dir, "pidns", "  run_as user nobody group nogroup\n");
    // With `/proc` readable whole, what it lists is the namespace's: the
    // init (1), the workload and nothing of the host. (A standalone
    // sandbox's preflight probe took a pid before the workload: the
    // workload's own need not be 2.)
    let code = "pids=sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\nprint(os.getppid(),pids==[1,os.getpid()],pids[0])\nr('init/environ',lambda: open('/proc/1/environ').read())\nr('init/mem',lambda: open('/proc/1/mem','rb').read(1))\nr('kill init',lambda: os.kill(1,9))\nprint('mounts of proc',sum(l.split()[8]=='proc' for l in open('/proc/self/mountinfo') if len(l.split())>8))\n";
    let out = run_python(&net, &dir, &b, &[], code);
    assert_eq!(
        out,
        "1 True 1\ninit/environ 13\ninit/mem 13\nkill init 1\nmounts of proc 1\n"
    );
}

#[test]
fn the_init_reaps_the_orphans_and_keeps_the_workloads_exit_status() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let b = policy(&dir, "orphans", "  run_as user nobody group nogroup\n");
    // Each grandchild is orphaned at once and handed to the init; the
    // zombies left are counted until none is, for five seconds at most.
    let code = "for i in range(200):\n  if os.fork()==0:\n    if os.fork()==0: os._exit(0)\n    os._exit(0)\n  os.waitpid(-1,0)\ndef zombies():\n  n=0\n  for p in os.listdir('/proc'):\n    try:\n      if p.isdigit() and open('/proc/%s/stat'%p).read().rsplit(') ',1)[1][0]=='Z': n+=1\n    except OSError: pass\n  return n\nend=time.time()+5\nwhile zombies() and time.time()<end: time.sleep(0.01)\nprint('zombies',zombies(),flush=True)\nsys.exit(3)\n";
    let args = python_args(&dir, &b, &[], code);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = output(net.supervisor(&args, None));
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(stdout(&out), "zombies 0\n");
}

#[test]
fn a_magic_link_under_proc_self_is_refused() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let b = policy(&dir, "magic", "  run_as user nobody group nogroup\n");
    let marker = dir.join("ran");
    // `/proc/self/root` would be `/`, whole.
    for path in [
        "/proc/self/root",
        "/proc/thread-self/cwd",
        "/proc/self/fd/0",
    ] {
        with_extra_read(&b, path);
        let out = net.run(&dir, &b, &[], &["/usr/bin/touch", marker.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(125), "{path}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("magic link"),
            "{path}: {}",
            stderr(&out)
        );
        assert!(!marker.exists(), "{path}: the command ran");
    }
}

#[test]
fn a_rule_naming_the_supervisors_pid_literally_is_refused() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let b = policy(&dir, "pid", "  run_as user nobody group nogroup\n");
    let marker = dir.join("read");
    // `ip netns exec` and `sh -c 'exec ..'` both exec in place: the pid
    // of this child is the supervisor's. The bundle names it once known.
    let script = format!(
        "read go; exec {SUPERVISOR} run --bundle {} --workdir {} -- /usr/bin/bash -c 'cat /proc/$PPID/net/tcp > {}'",
        b.display(),
        dir.path().display(),
        marker.display()
    );
    let mut child = Command::new("ip")
        .args(["netns", "exec", &net.name, "/bin/sh", "-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    with_extra_read(&b, &format!("/proc/{pid}/net"));
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    let want = format!("`/proc/{pid}/net` resolves to `/proc/{pid}/net`");
    assert!(stderr(&out).contains(&want), "{}", stderr(&out));
    assert!(!marker.exists());
}

/// Adds a read rule for `path` to the compiled bundle, as a bundle from
/// another compiler (or an edited one) could carry it: `check` refuses
/// such a path, the supervisor must refuse it on its own.
fn with_extra_read(bundle_path: &Path, path: &str) {
    use policy_bundle::Bundle;
    let b = Bundle::from_slice(&std::fs::read(bundle_path).unwrap()).unwrap();
    let mut enforcement = b.enforcement;
    let mut rule = enforcement
        .landlock
        .paths
        .iter()
        .find(|p| p.path == "/dev/urandom")
        .unwrap()
        .clone();
    rule.path = path.to_owned();
    enforcement
        .landlock
        .paths
        .retain(|p| !p.path.starts_with("/proc/"));
    enforcement.landlock.paths.push(rule);
    let b = Bundle::new(enforcement, b.provenance);
    std::fs::write(bundle_path, b.to_bytes()).unwrap();
}

// ---- item 3: file metadata ----

#[test]
fn setuid_bits_owners_and_xattrs_are_refused_even_in_writable_paths() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let b = policy(
        &dir,
        "meta",
        "  fs write workdir\n  run_as user nobody group nogroup\n",
    );
    let out = run_python(
        &net,
        &dir,
        &b,
        &[],
        "open('f','w').close()\nr('chmod-755',lambda: os.chmod('f',0o755))\nr('chmod-setuid',lambda: os.chmod('f',0o4755))\nr('chmod-setgid',lambda: os.chmod('f',0o2755))\nfd=os.open('f',os.O_RDONLY)\nr('fchmod-setuid',lambda: os.fchmod(fd,0o4755))\nr('fchmodat2-setuid',lambda: sc(452,-100,b'f',0o4755,0))\nr('create-setuid',lambda: os.open('g',os.O_CREAT|os.O_WRONLY,0o4755))\nr('tmpfile-setuid',lambda: os.open('.',os.O_TMPFILE|os.O_WRONLY,0o4755))\nr('mknod-setuid',lambda: os.mknod('h',stat.S_IFREG|0o4755))\nr('chown-own-group',lambda: os.chown('f',-1,os.getgid()))\nr('setxattr',lambda: os.setxattr('f','user.x',b'1'))\nr('fsetxattr',lambda: os.setxattr(fd,'user.x',b'1'))\nr('setxattrat',lambda: sc(463,-100,b'f',0,b'user.x',0,0))\nr('removexattr',lambda: os.removexattr('f','user.x'))\nr('openat2',lambda: sc(437,-100,b'f',bytes(24),24))\nprint(oct(os.stat('f').st_mode&0o7777),os.path.exists('g'),os.path.exists('h'))\n",
    );
    assert_eq!(
        out,
        "chmod-755 0\nchmod-setuid 1\nchmod-setgid 1\nfchmod-setuid 1\nfchmodat2-setuid 1\ncreate-setuid 1\ntmpfile-setuid 1\nmknod-setuid 1\nchown-own-group 1\nsetxattr 95\nfsetxattr 95\nsetxattrat 95\nremovexattr 95\nopenat2 38\n0o755 False False\n"
    );
}

#[test]
fn a_root_workload_cannot_change_modes_times_xattrs_or_generation_of_host_files() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let host = Dir::new();
    let file = host.join("host.conf");
    std::fs::write(&file, "host\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::metadata(&file).unwrap();
    // Root on purpose, and root because the policy names no user.
    for run_as in ["  run_as user root\n", ""] {
        // Readable (so the workload can open it read-only), never writable.
        let extra = format!(
            "  fs read {}\n  fs write workdir\n{run_as}",
            host.path().display()
        );
        let b = policy(&dir, "root", &extra);
        let code = format!(
            "p={file:?}\nprint('uid',os.getuid())\nr('chmod',lambda: os.chmod(p,0o666))\nr('chmod-setuid',lambda: os.chmod(p,0o4755))\nfd=os.open(p,os.O_RDONLY)\nr('fchmod-readonly-fd',lambda: os.fchmod(fd,0o666))\nr('fchmodat2-empty-path',lambda: sc(452,fd,b'',0o666,0x1000))\nr('utime',lambda: os.utime(p,(0,0)))\nr('futimens',lambda: os.utime(fd,(0,0)))\nr('chown',lambda: os.chown(p,0,0))\nr('fchown',lambda: os.fchown(fd,0,0))\nr('setxattr',lambda: os.setxattr(p,'user.x',b'1'))\nr('fsetxattr',lambda: os.setxattr(fd,'user.x',b'1'))\nimport fcntl\nfor name,req in (('setversion',0x40087602),('ext4-setversion',0x40086604)):\n  r(name,lambda: fcntl.ioctl(fd,req,struct.pack('l',7)))\nr('chmod-workdir',lambda: (open('w','w').close(), os.chmod('w',0o700)))\n"
        );
        let out = run_python(&net, &dir, &b, &[], &code);
        assert_eq!(
            out,
            "uid 0\nchmod 1\nchmod-setuid 1\nfchmod-readonly-fd 1\nfchmodat2-empty-path 1\nutime 1\nfutimens 1\nchown 1\nfchown 1\nsetxattr 95\nfsetxattr 95\nsetversion 1\next4-setversion 1\nchmod-workdir 1\n",
            "{run_as:?}"
        );
        std::fs::remove_file(dir.join("w")).unwrap();
    }
    let after = std::fs::metadata(&file).unwrap();
    assert_eq!(after.mode(), before.mode());
    assert_eq!(after.mtime(), before.mtime());
    // The inode's generation is not visible here, but setting it changes
    // the ctime too.
    assert_eq!(
        (after.ctime(), after.ctime_nsec()),
        (before.ctime(), before.ctime_nsec())
    );
    assert_eq!((after.uid(), after.gid()), (before.uid(), before.gid()));
}

// ---- item 12: root daemons' sockets ----

#[test]
fn a_root_owned_daemon_socket_is_out_of_reach() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let daemon = dir.join("daemon.sock");
    let listener = std::os::unix::net::UnixListener::bind(&daemon).unwrap();
    std::fs::set_permissions(&daemon, std::fs::Permissions::from_mode(0o600)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let b = policy(&dir, "daemon", "  run_as user nobody group nogroup\n");
    let out = run_python(
        &net,
        &dir,
        &b,
        &[],
        &format!("r('connect',lambda: socket.socket(socket.AF_UNIX).connect({daemon:?}))\n"),
    );
    assert_eq!(out, "connect 13\n");
    assert!(listener.accept().is_err(), "the daemon got a connection");
}

// ---- item 4: listen without bind ----

/// The workload listens on a socket it never bound, reports the port it
/// got (0: none) in `port`, and waits for `done` before it exits.
const LISTEN: &str = "s=socket.socket()\nr('listen',lambda: s.listen(1))\nport=s.getsockname()[1]\nif port:\n  c=socket.create_connection(('127.0.0.1',port)); a,_=s.accept(); print('inside',1)\nopen('port.tmp','w').write(str(port)); os.rename('port.tmp','port')\nwhile not os.path.exists('done'): time.sleep(0.01)\n";

/// Runs [`LISTEN`]; while it waits, connects from the supervisor's
/// namespace to the port it reported. Returns the workload's stdout and
/// whether that connect succeeded.
fn listen_attack(net: &TestNet, dir: &Dir, netns: &str) -> (String, u16, bool) {
    let b = policy(
        dir,
        "listen",
        "  fs write workdir\n  run_as user nobody group nogroup\n",
    );
    let args = python_args(dir, &b, &["--netns", netns], LISTEN);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = net.supervisor(&args, None);
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&dir.join("port"));
    let port: u16 = std::fs::read_to_string(dir.join("port"))
        .unwrap()
        .parse()
        .unwrap();
    let ns = std::fs::File::open(format!("/run/netns/{}", net.name)).unwrap();
    let target = SocketAddr::from(([127, 0, 0, 1], port));
    let reached = enforcer::in_netns(ns.as_fd(), || {
        TcpStream::connect_timeout(&target, Duration::from_secs(5)).is_ok()
    })
    .unwrap();
    std::fs::write(dir.join("done"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    (stdout(&out), port, reached)
}

#[test]
fn listen_without_bind_on_the_hosts_network_is_refused() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let (out, port, reached) = listen_attack(&net, &dir, "none");
    assert!(!reached, "the host reached the workload's port {port}");
    assert_eq!(out, "listen 13\n");
    assert_eq!(port, 0, "the socket was bound anyway");
    let lines = denied(&dir, "listen");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0]["message"]
            .as_str()
            .unwrap()
            .contains("unbound socket"),
        "{}",
        lines[0]
    );
}

#[test]
fn listen_in_the_sandboxs_namespace_is_reachable_only_from_inside() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let (out, port, reached) = listen_attack(&net, &dir, "new");
    assert_eq!(out, "listen 0\ninside 1\n");
    assert_ne!(port, 0);
    assert!(!reached, "the host reached the sandbox's port {port}");
}

// ---- never "continue" a connect ----

/// Hands one TCP socket of the test's (the supervisor's, the "host")
/// namespace, unbound and unconnected, to whoever connects to the unix
/// socket at argv[1], then waits until that peer is done.
const TCP_FD_SERVER: &str = "import os,socket,sys\npath=sys.argv[1]\nt=socket.socket(socket.AF_INET,socket.SOCK_STREAM)\nsrv=socket.socket(socket.AF_UNIX); srv.bind(path); os.chmod(path,0o777); srv.listen(1)\nprint('ready',flush=True)\nc,_=srv.accept()\nsocket.send_fds(c,[b'fds'],[t.fileno()])\nc.recv(1)\n";

/// The race a "continue" would lose: one thread connects fd `fd` to the
/// address in `buf` through libc (the kernel reads both anew when a call
/// is continued), a second keeps `dup2`-ing the host socket and the
/// sandbox's own socket onto `fd`, a third keeps rewriting `buf` between
/// the sandbox's loopback (a connect the broker performs) and the hosted
/// trap (one it refuses). Prints the number of connects tried.
const SWAP_RACE: &str = "import threading\nsys.setswitchinterval(1e-5)\nu=socket.socket(socket.AF_UNIX); u.connect(sys.argv[1])\n_,fds,_,_=socket.recv_fds(u,16,1)\nhost=fds[0]\nsb=socket.socket().detach()\nfd=socket.socket().detach()\ndef sa(ip,port): return struct.pack('=H',2)+struct.pack('!H',port)+socket.inet_aton(ip)+bytes(8)\nnear=sa('127.0.0.1',int(sys.argv[2])); far=sa(sys.argv[3],int(sys.argv[4]))\nbuf=ctypes.create_string_buffer(near,16)\nstop=time.monotonic()+float(sys.argv[5])\ndef swap():\n  while time.monotonic()<stop:\n    os.dup2(host,fd); os.dup2(sb,fd)\ndef rewrite():\n  while time.monotonic()<stop:\n    ctypes.memmove(buf,far,16); ctypes.memmove(buf,near,16)\nts=[threading.Thread(target=swap),threading.Thread(target=rewrite)]\nfor t in ts: t.start()\nn=0\nwhile time.monotonic()<stop:\n  libc.connect(fd,buf,16); n+=1\nfor t in ts: t.join()\nu.send(b'x')\nprint('tries',n)\n";

/// No connect is ever continued: the workload races the broker with
/// every swap the kernel would honour on a continued call (the fd number
/// onto a socket of the host's namespace, the address onto a refused
/// destination) and neither trap, one on the host's loopback at the port
/// the checked address names and one at a hosted stand-in for the
/// outside world, ever sees a connection. Were the loopback connect
/// answered with "continue" instead of performed on the socket the
/// supervisor took, the host socket would connect from the host.
#[test]
fn a_connect_raced_by_fd_and_address_swaps_never_reaches_a_refused_destination() {
    let (net, dir) = (TestNet::new(), Dir::new());
    net.host("198.51.100.7/32");
    let near = net.trap_tcp("127.0.0.1:0");
    let port = near.local_addr().unwrap().port();
    let far = net.trap_tcp(&format!("198.51.100.7:{port}"));
    let path = dir.join("fds.sock");
    let mut server = Command::new("ip")
        .args([
            "netns",
            "exec",
            &net.name,
            "/usr/bin/python3",
            "-c",
            TCP_FD_SERVER,
        ])
        .arg(&path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(server.stdout.as_mut().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready, "ready\n");
    // A route to another host on the traps' port: Landlock then lets
    // the workload connect to that port, so the broker alone stands
    // between a continued call and the traps.
    let b = policy(
        &dir,
        "race",
        &format!("  run_as user nobody group nogroup\n  allow clients -> elsewhere.test:{port}\n"),
    );
    let mut args = python_args(
        &dir,
        &b,
        &["--resolve", "elsewhere.test=192.0.2.1"],
        SWAP_RACE,
    );
    args.extend([
        path.to_str().unwrap().to_owned(),
        port.to_string(),
        "198.51.100.7".to_owned(),
        port.to_string(),
        "4".to_owned(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = output(net.supervisor(&args, None));
    let _ = server.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    let tries: u64 = stdout(&out)
        .strip_prefix("tries ")
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("{} {}", stdout(&out), stderr(&out)));
    assert!(tries > 200, "only {tries} connects raced");
    for (name, trap) in [("host loopback", &near), ("hosted", &far)] {
        let got = trap.accept();
        assert!(
            matches!(&got, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "the {name} trap got a connection after {tries} tries: {got:?}"
        );
    }
}

// ---- standard streams ----

/// A standard stream that is an unconnected IP socket is a socket of the
/// host's namespace the workload could send through past the broker:
/// the supervisor started with one (a UDP socket) as stdin, or as stdout,
/// refuses to launch (status 125) and the command never runs. Without
/// the check the command runs and the launch succeeds.
#[test]
fn an_unconnected_ip_socket_as_a_standard_stream_stops_the_launch() {
    let (net, dir) = (TestNet::new(), Dir::new());
    let b = policy(&dir, "stdio", "  fs write workdir\n");
    let marker = dir.join("ran");
    let script = format!("echo > {}", marker.display());
    for stream in [0, 1] {
        let sock = net.udp("127.0.0.1:0");
        let args = [
            "run",
            "--bundle",
            b.to_str().unwrap(),
            "--workdir",
            dir.path().to_str().unwrap(),
            "--",
            "/bin/sh",
            "-c",
            &script,
        ];
        let mut cmd = net.supervisor(&args, None);
        let sock = std::os::fd::OwnedFd::from(sock);
        if stream == 0 {
            cmd.stdin(Stdio::from(sock)).stdout(Stdio::piped());
        } else {
            cmd.stdin(Stdio::null()).stdout(Stdio::from(sock));
        }
        let out = cmd.stderr(Stdio::piped()).output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("not a connected stream"),
            "{}",
            stderr(&out)
        );
        assert!(!marker.exists(), "stream {stream}: the command ran");
    }
}
