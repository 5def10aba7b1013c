//! Binary identity: what `/proc/<pid>/exe` says, even when the file at the
//! path was deleted or replaced after the exec.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::TempDir;
use enforcer::FingerprintCache;

fn copy_exec(from: &str, to: &Path) {
    std::fs::copy(from, to).unwrap();
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Spawns `path` reading stdin forever (`cat`) or sleeping (`sleep 60`).
/// Retries on ETXTBSY: a fork in a parallel test may briefly hold the
/// just-copied file open for writing.
fn spawn(path: &Path, args: &[&str]) -> Child {
    for _ in 0..100 {
        match Command::new(path).args(args).stdin(Stdio::piped()).spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other.unwrap(),
        }
    }
    panic!("`{}` stayed busy", path.display());
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn own_binary_is_identified_and_cached() {
    let me = std::process::id();
    let exe = enforcer::exe_path(me).unwrap();
    assert_eq!(exe.path, std::env::current_exe().unwrap());
    assert!(!exe.deleted);

    let mut cache = FingerprintCache::new(8);
    let first = cache.fingerprint(me).unwrap();
    let second = cache.fingerprint(me).unwrap();
    assert!(!first.cached && second.cached);
    assert_eq!(first.sha256, second.sha256);
    assert_eq!(first.sha256, enforcer::sha256_file(&exe.path).unwrap());
    assert_eq!(first.sha256_hex().len(), 64);
    assert_eq!(cache.len(), 1);
}

#[test]
fn a_deleted_binary_is_reported_and_still_hashed() {
    let dir = TempDir::new("identity-deleted");
    let bin = dir.path().join("sleeper");
    copy_exec("/usr/bin/sleep", &bin);
    let expected = enforcer::sha256_file(&bin).unwrap();
    let child = spawn(&bin, &["60"]);
    std::fs::remove_file(&bin).unwrap();

    let exe = enforcer::exe_path(child.id()).unwrap();
    assert_eq!(exe.path, bin);
    assert!(exe.deleted);
    let fp = FingerprintCache::new(8).fingerprint(child.id()).unwrap();
    assert_eq!(
        fp.sha256, expected,
        "hashed through /proc, not the gone path"
    );
    stop(child);
}

#[test]
fn a_name_ending_in_deleted_is_not_mistaken_for_a_deleted_file() {
    let dir = TempDir::new("identity-name");
    let bin = dir.path().join("tool (deleted)");
    copy_exec("/usr/bin/sleep", &bin);
    let child = spawn(&bin, &["60"]);
    let exe = enforcer::exe_path(child.id()).unwrap();
    assert_eq!((exe.path.as_path(), exe.deleted), (bin.as_path(), false));
    stop(child);
}

#[test]
fn a_replaced_binary_gets_a_new_fingerprint() {
    let dir = TempDir::new("identity-replaced");
    let bin = dir.path().join("tool");
    copy_exec("/usr/bin/sleep", &bin);
    let first = spawn(&bin, &["60"]);

    // Replace the file at the same path, as an attacker with write access
    // to the directory could.
    let staged = dir.path().join("staged");
    copy_exec("/usr/bin/cat", &staged);
    std::fs::rename(&staged, &bin).unwrap();
    let second = spawn(&bin, &[]);

    let mut cache = FingerprintCache::new(8);
    let a = cache.fingerprint(first.id()).unwrap();
    let b = cache.fingerprint(second.id()).unwrap();
    assert_eq!(enforcer::exe_path(first.id()).unwrap().path, bin);
    assert_eq!(enforcer::exe_path(second.id()).unwrap().path, bin);
    assert_ne!(a.key, b.key);
    assert_ne!(a.sha256, b.sha256);
    assert!(!b.cached);
    assert_eq!(
        a.sha256,
        enforcer::sha256_file(Path::new("/usr/bin/sleep")).unwrap()
    );
    assert_eq!(
        b.sha256,
        enforcer::sha256_file(Path::new("/usr/bin/cat")).unwrap()
    );
    stop(first);
    stop(second);
}

#[test]
fn a_full_cache_starts_over_without_wrong_answers() {
    let me = std::process::id();
    let mut cache = FingerprintCache::new(1);
    let dir = TempDir::new("identity-cap");
    let bin = dir.path().join("tool");
    copy_exec("/usr/bin/sleep", &bin);
    let other = spawn(&bin, &["60"]);
    let a = cache.fingerprint(me).unwrap();
    let b = cache.fingerprint(other.id()).unwrap();
    let a2 = cache.fingerprint(me).unwrap();
    assert_eq!(cache.len(), 1);
    assert!(!b.cached && !a2.cached);
    assert_eq!(a.sha256, a2.sha256);
    stop(other);
}

#[test]
fn links_resolve_one_at_a_time_inside_the_given_root() {
    use std::os::unix::fs::symlink;
    let dir = TempDir::new("identity-links");
    let root = dir.path();
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    std::fs::write(root.join("usr/bin/python3.11"), "").unwrap();
    // Relative, chained, through a directory link, and absolute: the
    // absolute target is taken inside `root`, never in our own filesystem.
    symlink("python3.11", root.join("usr/bin/python3")).unwrap();
    symlink("usr/bin", root.join("bin")).unwrap();
    symlink("/bin/python3", root.join("usr/bin/py")).unwrap();
    symlink("../bin/./py", root.join("usr/bin/up")).unwrap();
    let real = Path::new("/usr/bin/python3.11");
    for named in ["/usr/bin/python3", "/bin/python3", "/usr/bin/py", "/bin/up"] {
        assert_eq!(
            enforcer::resolve_links(root, Path::new(named)).unwrap(),
            real,
            "{named}"
        );
    }
    assert_eq!(
        enforcer::resolve_links(root, Path::new("/usr/bin/python3.11")).unwrap(),
        real
    );
    symlink("loop", root.join("loop")).unwrap();
    assert_eq!(
        enforcer::resolve_links(root, Path::new("/loop"))
            .unwrap_err()
            .raw_os_error(),
        Some(libc::ELOOP)
    );
    assert!(enforcer::resolve_links(root, Path::new("/usr/bin/missing")).is_err());
    assert!(enforcer::resolve_links(root, Path::new("usr/bin/python3")).is_err());
}
