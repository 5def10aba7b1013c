//! The host's side of running the static sandbox under Podman, shared by
//! the sandbox's and the supervisor's Podman tests (the supervisor's
//! include this file by path): the binary, the host check, the root
//! filesystem and the confined `podman run` every test starts from.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The container's user, as the Podman driver will run workloads.
pub const USER: u32 = 999;

/// The statically linked sandbox, checked to link no shared library.
pub fn static_sandbox() -> PathBuf {
    let Some(path) = std::env::var_os("OPENSHELL_STATIC_SANDBOX") else {
        panic!(
            "OPENSHELL_STATIC_SANDBOX is not set: build the static sandbox and name it, \
             OPENSHELL_STATIC_SANDBOX=$(scripts/build-static-sandbox)"
        );
    };
    let path = PathBuf::from(path);
    let elf = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("OPENSHELL_STATIC_SANDBOX={}: {e}", path.display()));
    // An ELF file with a PT_INTERP program header asks for a dynamic
    // loader; a static one (static-pie included) has none.
    assert!(
        !has_interpreter(&elf),
        "{} is linked dynamically: build it with scripts/build-static-sandbox",
        path.display()
    );
    path
}

fn has_interpreter(elf: &[u8]) -> bool {
    assert_eq!(
        &elf[..6],
        b"\x7fELF\x02\x01",
        "not a 64-bit little-endian ELF file"
    );
    let u16_at = |at: usize| usize::from(u16::from_le_bytes([elf[at], elf[at + 1]]));
    let phoff = usize::try_from(u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap())).unwrap();
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).any(|i| {
        let at = phoff + i * size;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == 3
    })
}

/// Fails, saying how to prepare the host, where Podman is missing.
pub fn require_podman() {
    let found = Command::new("podman")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "podman is missing or broken: run scripts/podman-host-prep"
    );
}

/// A root filesystem holding the static sandbox as `/openshell-sandbox`,
/// the directories the runtime mounts over, and whatever `more` adds;
/// reachable by the container's user.
pub fn rootfs(sandbox: &Path, more: impl FnOnce(&Path)) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for dir in ["proc", "dev", "sys", "tmp", "etc", "run"] {
        std::fs::create_dir(root.path().join(dir)).unwrap();
    }
    std::fs::set_permissions(
        root.path().join("tmp"),
        std::fs::Permissions::from_mode(0o1777),
    )
    .unwrap();
    std::fs::copy(sandbox, root.path().join("openshell-sandbox")).unwrap();
    more(root.path());
    root
}

/// Lends `root` the host's `/usr` read-only, and `/bin`, `/lib`... as the
/// host has them: links into `/usr`, or more read-only volumes. The `-v`
/// arguments it needs.
pub fn host_usr(root: &Path) -> Vec<String> {
    let mut volumes = vec!["/usr:/usr:ro".to_owned()];
    for dir in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
        let host = Path::new("/").join(dir);
        if let Ok(target) = std::fs::read_link(&host) {
            std::os::unix::fs::symlink(target, root.join(dir)).unwrap();
        } else if host.is_dir() {
            std::fs::create_dir(root.join(dir)).unwrap();
            volumes.push(format!("/{dir}:/{dir}:ro"));
        }
    }
    volumes
}

/// `podman run` as the Podman driver confines a workload: crun, no cgroup,
/// no network, [`USER`], no capability, `no_new_privs`.
pub fn confined_run() -> Command {
    let mut podman = Command::new("podman");
    podman
        .args(["--runtime", "crun", "run", "--rm", "--cgroups=disabled"])
        .args(["--network=none", "--user", &format!("{USER}:{USER}")])
        .args(["--cap-drop", "all", "--security-opt", "no-new-privileges"]);
    podman
}
