//! Binary identity against the real kernel: a binary named through a
//! symbolic link matches what runs, and the escapes around identity fail —
//! a bundle the workload rewrites, and code the workload plants in an
//! allowed binary (`LD_PRELOAD`, `dlopen`).
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{Dir, SYSTEM, TestNet, bundle, exe, log_lines, output, stderr, stdout};

/// A server on the test's loopback that the policies name `local.test`.
struct Setup {
    net: TestNet,
    dir: Dir,
    port: u16,
}

fn setup() -> Setup {
    let net = TestNet::new();
    let dir = Dir::new();
    let port = common::http_server(net.tcp("127.0.0.1:0")).port();
    Setup { net, dir, port }
}

impl Setup {
    fn args<'a>(&'a self, bundle: &'a Path, log: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![
            "run",
            "--bundle",
            bundle.to_str().unwrap(),
            "--workdir",
            self.dir.path().to_str().unwrap(),
            "--resolve",
            "local.test=127.0.0.1",
            "--log",
            log.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        args.push("--");
        args
    }

    fn run(&self, bundle: &Path, cmd: &[&str]) -> (Output, Vec<serde_json::Value>) {
        let log = self.dir.log();
        let _ = std::fs::remove_file(&log);
        let mut args = self.args(bundle, &log, &[]);
        args.extend_from_slice(cmd);
        let out = output(self.net.supervisor(&args, None));
        (out, log_lines(&log))
    }

    fn denied(log: &[serde_json::Value]) -> Vec<&serde_json::Value> {
        log.iter().filter(|l| l["action"] == "Denied").collect()
    }
}

/// Python that connects to `local.test` on each port and prints the errno
/// of each attempt (0: connected).
fn py_connects(ports: &[u16]) -> String {
    let mut code = String::from(
        "import socket\ndef c(p):\n  s=socket.socket()\n  try:\n    s.connect(('local.test',p)); print(0, flush=True)\n  except OSError as e:\n    print(e.errno, flush=True)\n",
    );
    for p in ports {
        code.push_str(&format!("c({p})\n"));
    }
    code
}

// ---- symbolic links ----

#[test]
fn a_binary_named_through_a_symlink_matches_what_runs() {
    let s = setup();
    let real = exe("/usr/bin/python3");
    assert_ne!(real, "/usr/bin/python3", "this system's python3 is a link");
    // A link of our own, two hops away from the file that runs, in a
    // directory the workload cannot write.
    let links = s.dir.mkdir("links");
    std::fs::set_permissions(&links, std::fs::Permissions::from_mode(0o755)).unwrap();
    let py = links.join("py");
    symlink("/usr/bin/python3", &py).unwrap();
    let other = common::http_server(s.net.tcp("127.0.0.1:0")).port();
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  fs exec {}\n  run_as user nobody group nogroup\n  allow /usr/bin/python3 -> local.test:{}\n  allow {} -> local.test:{other}\n",
        links.display(),
        s.port,
        py.display(),
    );
    let b = bundle(&s.dir, "links", &body);
    let third = (1..)
        .map(|d| s.port.wrapping_add(d))
        .find(|p| *p != other)
        .unwrap();
    let (out, log) = s.run(
        &b,
        &["/usr/bin/python3", "-c", &py_connects(&[s.port, third])],
    );
    assert_eq!(stdout(&out), "0\n111\n", "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("binary `/usr/bin/python3` is a link to `{real}`")),
        "the expansion is logged: {err}"
    );
    assert!(
        err.contains(&format!("binary `{}` is a link to `{real}`", py.display())),
        "{err}"
    );
    // The refusal names the file that ran and says which link it was
    // tried as.
    let denied = Setup::denied(&log);
    assert_eq!(denied.len(), 1, "{log:?}");
    assert_eq!(denied[0]["actor"]["process"]["file"]["path"], real.as_str());
    let message = denied[0]["message"].as_str().unwrap();
    assert!(
        message.contains("runs as the target of the link"),
        "{message}"
    );
    assert!(message.contains("/usr/bin/python3`"), "{message}");
    // Run through our own link, the rules of that name hold as well.
    let (out, log) = s.run(&b, &[py.to_str().unwrap(), "-c", &py_connects(&[other])]);
    assert_eq!(stdout(&out), "0\n", "{} {log:?}", stderr(&out));
}

#[test]
fn a_pin_on_a_symlinked_name_applies_to_the_file_that_runs() {
    let s = setup();
    let wrong = "0".repeat(64);
    let real_sha: String = enforcer::sha256_file(Path::new("/usr/bin/python3"))
        .unwrap()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let body = |pin: &str| {
        format!(
            "  landlock hard min_abi 4\n{SYSTEM}  run_as user nobody group nogroup\n  binaries py = /usr/bin/python3 sha256:{pin}\n  allow py -> local.test:{}\n",
            s.port
        )
    };
    let b = bundle(&s.dir, "wrongpin", &body(&wrong));
    let (out, log) = s.run(&b, &["/usr/bin/python3", "-c", &py_connects(&[s.port])]);
    assert_eq!(stdout(&out), "111\n", "{}", stderr(&out));
    let message = Setup::denied(&log)[0]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("SHA-256"), "{message}");
    let b = bundle(&s.dir, "rightpin", &body(&real_sha));
    let (out, _) = s.run(&b, &["/usr/bin/python3", "-c", &py_connects(&[s.port])]);
    assert_eq!(stdout(&out), "0\n", "{}", stderr(&out));
}

// ---- a bundle the workload can write ----

/// A policy that lets the workload write its working directory (where
/// the test puts the bundle) and reach `local.test:PORT` only.
fn writable_workdir_policy(s: &Setup, name: &str, ports: &[u16]) -> PathBuf {
    let mut body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  fs write workdir\n  run_as user nobody group nogroup\n"
    );
    for p in ports {
        body.push_str(&format!(
            "  allow {} -> local.test:{p}\n",
            exe("/usr/bin/python3")
        ));
    }
    bundle(&s.dir, name, &body)
}

#[test]
fn watch_refuses_a_bundle_the_workload_can_write_or_replace() {
    let s = setup();
    let b = writable_workdir_policy(&s, "own", &[s.port]);
    let log = s.dir.log();
    let mut args = s.args(&b, &log, &["--watch"]);
    args.push("/usr/bin/true");
    let out = output(s.net.supervisor(&args, None));
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        flat(&out).contains("which the workload can change"),
        "{}",
        stderr(&out)
    );
    // The file itself read-only for the workload, in a directory it cannot
    // write, but that directory sits in one it can: it renames the
    // directory away and puts its own in place. Refused as well.
    let sub = s.dir.join("ro");
    std::fs::create_dir(&sub).unwrap();
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
    let moved = sub.join("own.bundle");
    std::fs::copy(&b, &moved).unwrap();
    let mut args = s.args(&moved, &log, &["--watch"]);
    args.push("/usr/bin/true");
    let out = output(s.net.supervisor(&args, None));
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(
        flat(&out).contains("may write the directory") && flat(&out).contains("/ro`"),
        "{}",
        stderr(&out)
    );
    // Outside what the workload can write, `--watch` starts.
    let safe = Dir::new();
    let kept = safe.join("own.bundle");
    std::fs::copy(&b, &kept).unwrap();
    std::fs::set_permissions(safe.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut args = s.args(&kept, &log, &["--watch"]);
    args.push("/usr/bin/true");
    let out = output(s.net.supervisor(&args, None));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// The workload rewrites its own bundle with a wider one (a valid bundle
/// with a correct digest); the operator's `SIGHUP` must not apply it.
#[test]
fn a_workload_that_rewrites_its_bundle_does_not_widen_its_rules() {
    let s = setup();
    let wider_port = common::http_server(s.net.tcp("127.0.0.1:0")).port();
    let b = writable_workdir_policy(&s, "narrow", &[s.port]);
    let wider = writable_workdir_policy(&s, "wider", &[s.port, wider_port]);
    let log = s.dir.log();
    let _ = std::fs::remove_file(&log);
    let wd = s.dir.path().to_str().unwrap();
    let script = format!(
        "import shutil,os,time\nshutil.copyfile('{}', '{wd}/new')\nos.replace('{wd}/new', '{}')\nopen('{wd}/rewritten','w').close()\nwhile not os.path.exists('{wd}/go'): time.sleep(0.02)\n{}",
        wider.display(),
        b.display(),
        py_connects(&[wider_port]),
    );
    let mut args = s.args(&b, &log, &[]);
    args.extend_from_slice(&["/usr/bin/python3", "-c", &script]);
    let mut cmd = s.net.supervisor(&args, None);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    wait_for("the rewrite", || s.dir.join("rewritten").exists());
    assert_eq!(
        std::fs::read(&b).unwrap(),
        std::fs::read(&wider).unwrap(),
        "the workload did rewrite its bundle"
    );
    enforcer::send_signal(child.id(), libc::SIGHUP).unwrap();
    let reloads = || -> Vec<serde_json::Value> {
        log_lines(&log)
            .into_iter()
            .filter(|l| l["class_uid"] == 6002)
            .collect()
    };
    wait_for("the reload", || !reloads().is_empty());
    std::fs::write(s.dir.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let reload = &reloads()[0];
    assert_eq!(reload["status"], "Failure", "{reload}");
    assert!(
        reload["message"]
            .as_str()
            .unwrap()
            .contains("can change the bundle"),
        "{reload}"
    );
    assert_eq!(
        stdout(&out),
        "111\n",
        "still the narrow rules: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("reloads of it are refused"),
        "{}",
        stderr(&out)
    );
}

/// Stderr with miette's line wrapping undone.
fn flat(out: &Output) -> String {
    stderr(out)
        .replace('│', " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(
            start.elapsed().as_secs() < 30,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

// ---- code planted in an allowed binary ----

/// A shared object whose constructor announces itself: the code a
/// workload would put into an allowed binary.
fn planted_library(dir: &Path) -> PathBuf {
    let src = dir.join("planted.c");
    std::fs::write(
        &src,
        "#include <unistd.h>\n__attribute__((constructor)) static void planted(void) { write(2, \"planted code runs\\n\", 18); }\nunsigned int la_version(unsigned int v) { return v; }\n",
    )
    .unwrap();
    let lib = dir.join("planted.so");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .unwrap();
    assert!(status.success(), "cc builds the library");
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o755)).unwrap();
    lib
}

fn clients_policy(s: &Setup) -> PathBuf {
    clients_policy_with(s, "  fs write workdir\n")
}

/// The working directory writable and executable: the kernel maps code
/// from it, and the broker's check of the mappings guards identities.
fn clients_policy_exec_workdir(s: &Setup) -> PathBuf {
    clients_policy_with(s, "  fs write workdir\n  fs exec workdir\n")
}

fn clients_policy_with(s: &Setup, fs: &str) -> PathBuf {
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}{fs}  run_as user nobody group nogroup\n  binaries clients = {} {}\n  allow clients -> local.test:{}\n",
        exe("/usr/bin/curl"),
        exe("/usr/bin/python3"),
        s.port
    );
    bundle(&s.dir, "clients", &body)
}

#[test]
fn ld_preload_of_a_library_the_workload_can_write_takes_the_identity_away() {
    let s = setup();
    let lib = planted_library(s.dir.path());
    let b = clients_policy_exec_workdir(&s);
    let url = format!("http://local.test:{}/", s.port);
    // The same curl, first as itself, then with the planted library.
    let script = format!(
        "/usr/bin/curl -sS --max-time 10 {url}; echo \" plain=$?\"; LD_PRELOAD={} /usr/bin/curl -sS --max-time 10 {url}; echo \" preloaded=$?\"",
        lib.display()
    );
    let (out, log) = s.run(&b, &["/usr/bin/bash", "-c", &script]);
    let text = stdout(&out);
    assert!(text.contains("ok plain=0"), "{text} {}", stderr(&out));
    assert!(
        text.contains(" preloaded=7"),
        "curl could not connect: {text}"
    );
    assert!(
        stderr(&out).contains("planted code runs"),
        "the library did run in curl"
    );
    let denied = Setup::denied(&log);
    assert_eq!(denied.len(), 1, "{log:?}");
    assert_eq!(
        denied[0]["actor"]["process"]["file"]["path"],
        exe("/usr/bin/curl")
    );
    let message = denied[0]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("runs code from `{}`", lib.display())),
        "{message}"
    );
    assert!(
        message.contains("which the workload can write"),
        "{message}"
    );
}

#[test]
fn ld_audit_and_dlopen_of_a_planted_library_take_the_identity_away_too() {
    let s = setup();
    let lib = planted_library(s.dir.path());
    let b = clients_policy_exec_workdir(&s);
    // LD_AUDIT: the loader maps the library before the program's own.
    let url = format!("http://local.test:{}/", s.port);
    let script = format!(
        "LD_AUDIT={} /usr/bin/curl -sS --max-time 10 {url}; echo \" audited=$?\"",
        lib.display()
    );
    let (out, _) = s.run(&b, &["/usr/bin/bash", "-c", &script]);
    assert!(
        stdout(&out).contains(" audited=7"),
        "{} {}",
        stdout(&out),
        stderr(&out)
    );
    // dlopen (ctypes), after a first connect that is allowed; then the
    // workload unlinks the library, and a mapping of a deleted file is
    // refused too.
    let code = format!(
        "{}c({port})\nimport ctypes,os\nctypes.CDLL('{lib}')\nc({port})\nos.unlink('{lib}')\nc({port})\n",
        py_connects(&[]),
        port = s.port,
        lib = lib.display()
    );
    let (out, log) = s.run(&b, &["/usr/bin/python3", "-c", &code]);
    assert_eq!(stdout(&out), "0\n111\n111\n", "{}", stderr(&out));
    let messages: Vec<&str> = Setup::denied(&log)
        .iter()
        .map(|l| l["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages.len(), 2, "{log:?}");
    assert!(
        messages[0].contains("which the workload can write"),
        "{}",
        messages[0]
    );
    assert!(
        messages[1].contains("was deleted after it was mapped"),
        "{}",
        messages[1]
    );
}

#[test]
fn a_system_library_preloaded_keeps_the_identity() {
    let s = setup();
    let b = clients_policy(&s);
    // A library the workload cannot write is the system's code, not the
    // workload's: preloading it changes nothing about who connects.
    let libz = [
        "/usr/lib/x86_64-linux-gnu/libz.so.1",
        "/lib/x86_64-linux-gnu/libz.so.1",
        "/usr/lib64/libz.so.1",
        "/usr/lib/aarch64-linux-gnu/libz.so.1",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
    .expect("libz, which curl links");
    let url = format!("http://local.test:{}/", s.port);
    let script = format!("LD_PRELOAD={libz} /usr/bin/curl -sS --max-time 10 {url}");
    let (out, log) = s.run(&b, &["/usr/bin/bash", "-c", &script]);
    assert_eq!(stdout(&out), "ok", "{}", stderr(&out));
    assert!(Setup::denied(&log).is_empty(), "{log:?}");
}

// ---- a program planted at an allowed path ----

#[test]
fn a_program_planted_at_a_pinned_path_in_a_writable_tree_is_refused() {
    let s = setup();
    let bin = s.dir.mkdir("bin");
    let tool = bin.join("tool");
    std::fs::copy("/usr/bin/curl", &tool).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let sha: String = enforcer::sha256_file(&tool)
        .unwrap()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let body = |pin: &str| {
        format!(
            "  landlock hard min_abi 4\n{SYSTEM}  fs write {0}\n  fs exec {0}\n  run_as user nobody group nogroup\n  binaries tool = {1}{pin}\n  allow tool -> local.test:{2}\n",
            bin.display(),
            tool.display(),
            s.port
        )
    };
    // Unpinned, the policy does not compile: `check` and `compile` say
    // what `check --prove` says.
    let src = s.dir.join("unpinned.policy");
    std::fs::write(&src, format!("policy \"unpinned\" {{\n{}}}\n", body(""))).unwrap();
    let (checked, compiled) = policy_lang::load::compile_file(&src, None).unwrap();
    assert!(compiled.is_none());
    assert!(
        checked.diagnostics.iter().any(|d| d.code.id == "E0410"),
        "{:?}",
        checked.diagnostics
    );
    // Pinned, it compiles; the real tool connects, and a program the
    // workload puts in its place (python3, which would connect) is refused.
    let b = bundle(&s.dir, "pinned", &body(&format!(" sha256:{sha}")));
    let url = format!("http://local.test:{}/", s.port);
    let tool_s = tool.display();
    // The workload replaces the tool (its directory is writable) with
    // python3, which would connect, and runs it under the tool's name.
    let planted = format!(
        "import os,shutil\nos.remove('{tool_s}')\nshutil.copy('{}', '{tool_s}')\nos.execv('{tool_s}', ['{tool_s}', '-c', {:?}])\n",
        exe("/usr/bin/python3"),
        py_connects(&[s.port])
    );
    let real = format!("{tool_s} -sS --max-time 10 {url}; echo \" real=$?\"");
    let (out, _) = s.run(&b, &["/usr/bin/bash", "-c", &real]);
    assert!(
        stdout(&out).contains("ok real=0"),
        "{} {}",
        stdout(&out),
        stderr(&out)
    );
    let (out, log) = s.run(&b, &["/usr/bin/python3", "-c", &planted]);
    assert_eq!(stdout(&out), "111\n", "{}", stderr(&out));
    let denied = Setup::denied(&log);
    assert_eq!(denied.len(), 1, "{log:?}");
    assert_eq!(
        denied[0]["actor"]["process"]["file"]["path"],
        tool.to_str().unwrap()
    );
    let message = denied[0]["message"].as_str().unwrap();
    assert!(message.contains("SHA-256"), "{message}");
}

#[test]
fn a_link_to_a_file_the_workload_can_write_is_not_expanded() {
    let s = setup();
    // The name is outside every writable tree (so it compiles), but the
    // link leads into the working directory, which the workload writes.
    let links = s.dir.mkdir("links");
    std::fs::set_permissions(&links, std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = Dir::new();
    let target = work.join("tool");
    std::fs::copy(exe("/usr/bin/python3"), &target).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
    let name = links.join("tool");
    symlink(&target, &name).unwrap();
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  fs write workdir\n  fs exec workdir\n  run_as user nobody group nogroup\n  allow {} -> local.test:{}\n",
        name.display(),
        s.port
    );
    let b = bundle(&s.dir, "plantlink", &body);
    // The working directory, which the workload may write, is where the
    // link leads.
    let code = py_connects(&[s.port]);
    let args = [
        "run",
        "--bundle",
        b.to_str().unwrap(),
        "--workdir",
        work.path().to_str().unwrap(),
        "--resolve",
        "local.test=127.0.0.1",
        "--",
        target.to_str().unwrap(),
        "-c",
        &code,
    ];
    let cmd = s.net.supervisor(&args, None);
    let out = output(cmd);
    assert_eq!(stdout(&out), "111\n", "{}", stderr(&out));
    assert!(
        flat(&out).contains("which the workload can write: not expanded"),
        "{}",
        stderr(&out)
    );
}

// ---- code from a tree the workload may write, under every name ----

#[test]
fn code_from_a_tree_the_workload_may_write_but_not_execute_is_never_mapped() {
    let s = setup();
    let lib = planted_library(s.dir.path());
    let b = clients_policy(&s);
    let url = format!("http://local.test:{}/", s.port);
    // The loader cannot map the library: the constructor that would copy
    // itself to anonymous memory and unmap its file never runs.
    let script = format!(
        "LD_PRELOAD={} /usr/bin/curl -sS --max-time 10 {url}; echo \" preloaded=$?\"",
        lib.display()
    );
    let (out, log) = s.run(&b, &["/usr/bin/bash", "-c", &script]);
    assert_eq!(stdout(&out), "ok preloaded=0\n", "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("planted code runs"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("cannot be preloaded"),
        "{}",
        stderr(&out)
    );
    assert!(Setup::denied(&log).is_empty(), "{log:?}");
    // dlopen and a plain mmap(PROT_EXEC) of it fail the same way.
    let code = format!(
        "import ctypes,mmap,os\ntry:\n  ctypes.CDLL('{lib}'); print('loaded')\nexcept OSError as e:\n  print('dlopen', 'failed to map segment' in str(e))\nf=os.open('{lib}',os.O_RDONLY)\ntry:\n  mmap.mmap(f,4096,prot=mmap.PROT_READ|mmap.PROT_EXEC); print('mapped')\nexcept OSError as e:\n  print('mmap', e.errno)\n",
        lib = lib.display()
    );
    let (out, _) = s.run(&b, &["/usr/bin/python3", "-c", &code]);
    assert_eq!(stdout(&out), "dlopen True\nmmap 1\n", "{}", stderr(&out));
}

impl Setup {
    /// The supervisor with `args`, in a mount namespace where `tree` is
    /// also bind-mounted at `alias` (as an operator's mount would show
    /// it): its status, stdout, stderr.
    fn run_with_alias(&self, tree: &Path, alias: &Path, args: &[&str]) -> Output {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.net.name, "sh", "-c"])
            .arg("mount --bind \"$1\" \"$2\" && shift 2 && exec \"$@\"")
            .arg("sh")
            .arg(tree)
            .arg(alias)
            .arg(common::SUPERVISOR)
            .args(args);
        output(cmd)
    }
}

#[test]
fn a_writable_tree_bind_mounted_elsewhere_is_writable_there_too() {
    let s = setup();
    let alias = Dir::new();
    planted_library(s.dir.path());
    let aliased_lib = alias.path().join("planted.so");
    let url = format!("http://local.test:{}/", s.port);
    let log = s.dir.log();
    // Writable and executable: the mapping check knows the library by
    // its other name.
    let b = clients_policy_exec_workdir(&s);
    let script = format!(
        "LD_PRELOAD={} /usr/bin/curl -sS --max-time 10 {url}; echo \" preloaded=$?\"",
        aliased_lib.display()
    );
    let mut args = s.args(&b, &log, &[]);
    args.extend(["/usr/bin/bash", "-c", &script]);
    let out = s.run_with_alias(s.dir.path(), alias.path(), &args);
    assert!(
        stdout(&out).contains(" preloaded=7"),
        "{} {}",
        stdout(&out),
        stderr(&out)
    );
    let lines = log_lines(&log);
    let denied = Setup::denied(&lines);
    assert_eq!(denied.len(), 1, "{lines:?}");
    let message = denied[0]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("runs code from `{}`", aliased_lib.display())),
        "{message}"
    );
    // Writable only: the other name is noexec too.
    let b = clients_policy(&s);
    let code = format!(
        "import mmap,os\nf=os.open('{}',os.O_RDONLY)\ntry:\n  mmap.mmap(f,4096,prot=mmap.PROT_READ|mmap.PROT_EXEC); print('mapped')\nexcept OSError as e:\n  print('mmap', e.errno)\n",
        aliased_lib.display()
    );
    let mut args = s.args(&b, &log, &[]);
    args.extend(["/usr/bin/python3", "-c", &code]);
    let out = s.run_with_alias(s.dir.path(), alias.path(), &args);
    assert_eq!(stdout(&out), "mmap 1\n", "{}", stderr(&out));
    // A bundle to watch, or a log, under the other name: refused.
    std::fs::copy(&b, s.dir.join("watched.bundle")).unwrap();
    let watched = alias.path().join("watched.bundle");
    let mut args = s.args(&watched, &log, &["--watch"]);
    args.push("/usr/bin/true");
    let out = s.run_with_alias(s.dir.path(), alias.path(), &args);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).contains("writable_bundle"), "{}", stderr(&out));
    let aliased_log = alias.path().join("deny.log");
    let mut args = s.args(&b, &aliased_log, &[]);
    args.push("/usr/bin/true");
    let out = s.run_with_alias(s.dir.path(), alias.path(), &args);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).contains("writable_log"), "{}", stderr(&out));
}

#[test]
fn an_unpinned_program_in_a_tree_writable_through_a_symlink_is_refused() {
    let s = setup();
    let bin = s.dir.mkdir("bin");
    let tool = bin.join("tool");
    std::fs::copy("/usr/bin/curl", &tool).unwrap();
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Write is granted through a link: the policy's text never names the
    // tool's directory as writable, so `check` has nothing to report.
    let link = s.dir.join("link");
    symlink(&bin, &link).unwrap();
    let body = format!(
        "  landlock hard min_abi 4\n{SYSTEM}  fs write {}\n  fs exec {}\n  run_as user nobody group nogroup\n  binaries tool = {}\n  allow tool -> local.test:{}\n",
        link.display(),
        bin.display(),
        tool.display(),
        s.port
    );
    let b = bundle(&s.dir, "linked", &body);
    let url = format!("http://local.test:{}/", s.port);
    let script = format!(
        "{} -sS --max-time 10 {url}; echo \" tool=$?\"",
        tool.display()
    );
    let (out, log) = s.run(&b, &["/usr/bin/bash", "-c", &script]);
    assert!(
        stdout(&out).contains(" tool=7"),
        "{} {}",
        stdout(&out),
        stderr(&out)
    );
    let denied = Setup::denied(&log);
    assert_eq!(denied.len(), 1, "{log:?}");
    let message = denied[0]["message"].as_str().unwrap();
    assert!(
        message.contains("which the workload can write, and only a rule without a SHA-256 pin"),
        "{message}"
    );
}
