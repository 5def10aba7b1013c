use std::net::SocketAddr;
use std::num::NonZeroU64;

use prost::Message as _;

use crate::*;

fn binding() -> Binding {
    Binding {
        sandbox_id: "sb-1".into(),
        generation: 3,
    }
}

fn caller() -> Caller {
    Caller {
        pid: 7,
        tid: 8,
        exe: b"/usr/bin/curl".to_vec(),
        exe_deleted: false,
        exe_sha256: Some([9; 32]),
        foreign_code: None,
        writable_tree: None,
    }
}

fn id(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap()
}

fn dns(n: u64) -> FromSandbox {
    FromSandbox::Dns {
        request_id: id(n),
        caller: Some(caller()),
        transport: pb::Transport::Udp,
        packet: vec![1, 2, 3],
    }
}

fn connect() -> RelayUpKind {
    RelayUpKind::Connect {
        caller: caller(),
        destination: "[2001:db8::1]:443".parse::<SocketAddr>().unwrap(),
    }
}

const WELCOME: FromSupervisor = FromSupervisor::Welcome { launch: None };

fn hello() -> FromSandbox {
    FromSandbox::Hello {
        bundle_digest: Some(format!("sha256:{}", "ab".repeat(32))),
    }
}

#[test]
fn every_message_comes_back_as_sent() {
    let b = binding();
    let from_sandbox = [
        hello(),
        FromSandbox::Hello {
            bundle_digest: None,
        },
        dns(2),
        FromSandbox::Datagram {
            request_id: id(3),
            caller: Caller {
                exe_sha256: None,
                ..caller()
            },
            destination: "10.0.0.1:53".parse().unwrap(),
            payload: vec![0; 100],
        },
        FromSandbox::Refusal(refusal()),
        FromSandbox::Refusal(RefusalReport {
            exe: None,
            destination: None,
            address: Some(b"/run/docker.sock".to_vec()),
            note: Some("inbound".into()),
            ..refusal()
        }),
    ];
    for m in from_sandbox {
        let bytes = m.to_pb(&b).encode_to_vec();
        assert_eq!(decode_sandbox_message(&bytes, &b), Ok(m));
    }
    let from_supervisor = [
        FromSupervisor::Welcome { launch: None },
        FromSupervisor::Welcome {
            launch: Some(b"{}".to_vec()),
        },
        FromSupervisor::Datagram {
            request_id: id(1),
            verdict: DatagramVerdict::Refused(libc_eacces()),
        },
        FromSupervisor::Dns {
            request_id: id(2),
            packet: Vec::new(),
        },
        FromSupervisor::Datagram {
            request_id: id(3),
            verdict: DatagramVerdict::Sent(100),
        },
    ];
    for m in from_supervisor {
        let bytes = m.to_pb(&b).encode_to_vec();
        assert_eq!(decode_supervisor_message(&bytes, &b), Ok(m));
    }
    for m in [
        connect(),
        RelayUpKind::Data(vec![0; MAX_CHUNK]),
        RelayUpKind::ShutdownWrite,
    ] {
        assert_eq!(decode_relay_up(&m.to_pb(&b).encode_to_vec(), &b), Ok(m));
    }
    for m in [
        RelayDownKind::Connected,
        RelayDownKind::Refused(111),
        RelayDownKind::OwnLoopback,
        RelayDownKind::Data(vec![1, 2]),
        RelayDownKind::ShutdownWrite,
        RelayDownKind::Reset(104),
    ] {
        assert_eq!(RelayDownKind::check(m.to_pb(&b), &b), Ok(m));
    }
}

fn refusal() -> RefusalReport {
    RefusalReport {
        pid: 3,
        tid: 4,
        exe: Some(b"/usr/bin/nc".to_vec()),
        syscall: "sendto".into(),
        protocol: "udp".into(),
        destination: Some("192.0.2.1:53".parse().unwrap()),
        address: None,
        reason: "datagrams leave the sandbox only as DNS".into(),
        note: None,
    }
}

#[test]
fn a_malformed_refusal_is_refused_by_name() {
    let b = binding();
    let cases = [
        (
            RefusalReport {
                pid: 0,
                ..refusal()
            },
            "never 0",
        ),
        (
            RefusalReport {
                exe: Some(b"nc".to_vec()),
                ..refusal()
            },
            "refusal.exe",
        ),
        (
            RefusalReport {
                syscall: String::new(),
                ..refusal()
            },
            "refusal.syscall",
        ),
        (
            RefusalReport {
                protocol: "x".repeat(33),
                ..refusal()
            },
            "refusal.protocol",
        ),
        (
            RefusalReport {
                reason: String::new(),
                ..refusal()
            },
            "refusal.reason",
        ),
        (
            RefusalReport {
                reason: "x".repeat(MAX_REASON + 1),
                ..refusal()
            },
            "refusal.reason",
        ),
    ];
    for (r, why) in cases {
        let bytes = FromSandbox::Refusal(r).to_pb(&b).encode_to_vec();
        let err = decode_sandbox_message(&bytes, &b).unwrap_err().to_string();
        assert!(err.contains(why), "{err}");
    }
}

fn libc_eacces() -> i32 {
    13
}

#[test]
fn a_message_of_another_sandbox_or_generation_is_refused() {
    let b = binding();
    let other_generation = Binding {
        generation: 4,
        ..binding()
    };
    let other_sandbox = Binding {
        sandbox_id: "sb-2".into(),
        ..binding()
    };
    for wrong in [other_generation, other_sandbox] {
        let bytes = dns(1).to_pb(&wrong).encode_to_vec();
        assert!(matches!(
            decode_sandbox_message(&bytes, &b),
            Err(ProtocolError::WrongBinding { .. })
        ));
        let bytes = RelayUpKind::Data(vec![1]).to_pb(&wrong).encode_to_vec();
        assert!(matches!(
            decode_relay_up(&bytes, &b),
            Err(ProtocolError::WrongBinding { .. })
        ));
    }
    let mut unbound = dns(1).to_pb(&b);
    unbound.binding = None;
    assert_eq!(
        FromSandbox::check(unbound, &b),
        Err(ProtocolError::MissingBinding)
    );
}

#[test]
fn malformed_fields_are_refused_by_name() {
    let b = binding();
    let refused = |m: pb::RelayUp| match RelayUpKind::check(m, &b) {
        Err(ProtocolError::Field { field, .. } | ProtocolError::TooLong { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    let with = |f: &dyn Fn(&mut pb::ConnectRequest)| {
        let mut m = connect().to_pb(&b);
        if let Some(pb::relay_up::Kind::Connect(c)) = &mut m.kind {
            f(c);
        }
        m
    };
    assert_eq!(
        refused(with(&|c| c.destination = Some(pb::IpEndpoint {
            ip: vec![1, 2, 3],
            port: 1
        }))),
        "destination.ip"
    );
    assert_eq!(
        refused(with(&|c| c.destination = Some(pb::IpEndpoint {
            ip: vec![1, 2, 3, 4],
            port: 65_536
        }))),
        "destination.port"
    );
    assert_eq!(refused(with(&|c| c.destination = None)), "destination");
    assert_eq!(refused(with(&|c| c.caller = None)), "caller");
    let caller_field = |f: &dyn Fn(&mut pb::Caller)| {
        with(&|c| {
            if let Some(caller) = c.caller.as_mut() {
                f(caller);
            }
        })
    };
    assert_eq!(
        refused(caller_field(&|c| c.exe = b"curl".to_vec())),
        "caller.exe"
    );
    assert_eq!(
        refused(caller_field(&|c| c.exe = vec![b'/'; MAX_PATH + 1])),
        "caller.exe"
    );
    assert_eq!(
        refused(caller_field(&|c| c.exe_sha256 = vec![1; 31])),
        "caller.exe_sha256"
    );
    assert_eq!(refused(caller_field(&|c| c.tid = 0)), "caller");
    assert_eq!(
        refused(caller_field(&|c| c.writable_tree = b"usr".to_vec())),
        "caller.writable_tree"
    );
    assert_eq!(
        refused(caller_field(
            &|c| c.foreign_code = "x".repeat(MAX_REASON + 1)
        )),
        "caller.foreign_code"
    );
    let sandbox_refused = |m: pb::SandboxMessage| match FromSandbox::check(m, &b) {
        Err(ProtocolError::Field { field, .. } | ProtocolError::TooLong { field, .. }) => field,
        other => panic!("{other:?}"),
    };
    let mut zero = dns(1).to_pb(&b);
    if let Some(pb::sandbox_message::Kind::Dns(d)) = &mut zero.kind {
        d.request_id = 0;
    }
    assert_eq!(sandbox_refused(zero), "request_id");
    for t in [0, 9] {
        let mut odd = dns(1).to_pb(&b);
        if let Some(pb::sandbox_message::Kind::Dns(d)) = &mut odd.kind {
            d.transport = t;
        }
        assert_eq!(sandbox_refused(odd), "transport");
    }
    let mut bad_hello = hello().to_pb(&b);
    if let Some(pb::sandbox_message::Kind::Hello(h)) = &mut bad_hello.kind {
        h.bundle_digest = "sha256:XYZ".into();
    }
    assert_eq!(sandbox_refused(bad_hello), "bundle_digest");
    let mut old = hello().to_pb(&b);
    if let Some(pb::sandbox_message::Kind::Hello(h)) = &mut old.kind {
        h.protocol_version = 0;
    }
    assert_eq!(FromSandbox::check(old, &b), Err(ProtocolError::Version(0)));
    let mut empty = dns(1).to_pb(&b);
    empty.kind = None;
    assert_eq!(FromSandbox::check(empty, &b), Err(ProtocolError::NoKind));
    for bad in [0, -1, 4096] {
        let refusal = pb::RelayDown {
            binding: Some(b.to_pb()),
            kind: Some(pb::relay_down::Kind::RefusedErrno(bad)),
        };
        assert!(RelayDownKind::check(refusal, &b).is_err(), "{bad}");
    }
    let big = RelayUpKind::Data(vec![0; MAX_CHUNK + 1]).to_pb(&b);
    assert!(matches!(
        RelayUpKind::check(big, &b),
        Err(ProtocolError::TooLong { field: "data", .. })
    ));
}

#[test]
fn undecodable_and_oversized_bytes_are_refused() {
    let b = binding();
    assert!(matches!(
        decode_sandbox_message(&[0xff; 12], &b),
        Err(ProtocolError::Decode(_))
    ));
    assert_eq!(
        decode_sandbox_message(&vec![0; MAX_MESSAGE + 1], &b),
        Err(ProtocolError::MessageTooLarge(MAX_MESSAGE + 1))
    );
    assert_eq!(
        decode_sandbox_message(&[], &b),
        Err(ProtocolError::MissingBinding)
    );
}

#[test]
fn the_control_stream_keeps_its_order() {
    let mut order = ControlOrder::new();
    assert!(
        order.request(&dns(1)).is_err(),
        "a request before the Hello"
    );
    assert!(
        order.request(&FromSandbox::Refusal(refusal())).is_err(),
        "a report before the Hello"
    );
    order.request(&hello()).unwrap();
    order.request(&FromSandbox::Refusal(refusal())).unwrap();
    order.request(&FromSandbox::Refusal(refusal())).unwrap();
    assert!(order.request(&hello()).is_err(), "a second Hello");
    order.request(&dns(1)).unwrap();
    assert!(order.request(&dns(1)).is_err(), "an id already outstanding");
    let answer = FromSupervisor::Dns {
        request_id: id(1),
        packet: Vec::new(),
    };
    assert!(
        order.answer(&answer).is_err(),
        "an answer before the Welcome"
    );
    order.answer(&WELCOME).unwrap();
    assert!(order.answer(&WELCOME).is_err());
    let datagram_answer = FromSupervisor::Datagram {
        request_id: id(1),
        verdict: DatagramVerdict::Sent(1),
    };
    assert!(
        order.answer(&datagram_answer).is_err(),
        "an answer of another kind"
    );
    order.answer(&answer).unwrap();
    assert!(order.answer(&answer).is_err(), "answered twice");
    assert_eq!(order.outstanding(), 0);
    for n in 1..=crate::order::MAX_OUTSTANDING as u64 {
        order.request(&dns(n)).unwrap();
    }
    assert!(
        order.request(&dns(u64::MAX)).is_err(),
        "too many outstanding"
    );
}

#[test]
fn a_relay_stream_keeps_its_order() {
    let mut up = RelayOrder::new();
    assert!(
        up.up(&RelayUpKind::Data(vec![1])).is_err(),
        "data before the connect"
    );
    up.up(&connect()).unwrap();
    assert!(up.up(&connect()).is_err(), "a second connect");
    up.up(&RelayUpKind::Data(vec![1])).unwrap();
    up.up(&RelayUpKind::ShutdownWrite).unwrap();
    assert!(
        up.up(&RelayUpKind::Data(vec![1])).is_err(),
        "data after the shutdown"
    );
    assert!(up.up(&RelayUpKind::ShutdownWrite).is_err());
    let mut down = RelayOrder::new();
    assert!(
        down.down(&RelayDownKind::Data(vec![1])).is_err(),
        "data before the answer"
    );
    down.down(&RelayDownKind::Connected).unwrap();
    assert!(
        down.down(&RelayDownKind::Connected).is_err(),
        "a second answer"
    );
    down.down(&RelayDownKind::Data(vec![1])).unwrap();
    down.down(&RelayDownKind::Reset(104)).unwrap();
    assert!(down.down(&RelayDownKind::Data(vec![1])).is_err());
    let mut own = RelayOrder::new();
    own.down(&RelayDownKind::OwnLoopback).unwrap();
    assert!(own.down(&RelayDownKind::Data(vec![1])).is_err());
    assert!(own.down(&RelayDownKind::Connected).is_err());
    let mut refused = RelayOrder::new();
    refused.down(&RelayDownKind::Refused(111)).unwrap();
    assert!(
        refused.down(&RelayDownKind::Data(vec![1])).is_err(),
        "data after a refusal"
    );
}

fn sound_evidence() -> Evidence {
    Evidence {
        landlock_abi: 7,
        landlock_enforced: true,
        seccomp_mode: 2,
        listener_live: true,
        cap_bounding: 0,
        no_new_privs: true,
        uid: 65_534,
        euid: 65_534,
        ..Evidence::default()
    }
}

#[test]
fn evidence_comes_once_after_the_hello_and_its_go_after_the_welcome() {
    let mut order = ControlOrder::new();
    let evidence = FromSandbox::Evidence(sound_evidence());
    assert!(
        order.request(&evidence).is_err(),
        "Evidence before the Hello"
    );
    order.request(&hello()).unwrap();
    assert!(
        order.answer(&FromSupervisor::Go).is_err(),
        "a Go before the Welcome"
    );
    order.answer(&WELCOME).unwrap();
    assert!(
        order.answer(&FromSupervisor::Go).is_err(),
        "a Go before the Evidence"
    );
    assert!(!order.has_evidence());
    order.request(&evidence).unwrap();
    assert!(order.has_evidence());
    assert!(order.request(&evidence).is_err(), "a second Evidence");
    order.answer(&FromSupervisor::Go).unwrap();
    assert!(order.answer(&FromSupervisor::Go).is_err(), "a second Go");
    order.request(&FromSandbox::Ended(3)).unwrap();
    assert!(order.request(&dns(9)).is_err(), "a request after Ended");
    assert!(
        order.request(&FromSandbox::Ended(3)).is_err(),
        "a second Ended"
    );
    let ended = FromSandbox::Ended(137).to_pb(&binding()).encode_to_vec();
    assert_eq!(
        decode_sandbox_message(&ended, &binding()),
        Ok(FromSandbox::Ended(137))
    );
    let b = binding();
    let bytes = evidence.to_pb(&b).encode_to_vec();
    assert_eq!(decode_sandbox_message(&bytes, &b), Ok(evidence));
    let go = FromSupervisor::Go.to_pb(&b).encode_to_vec();
    assert_eq!(decode_supervisor_message(&go, &b), Ok(FromSupervisor::Go));
}

#[test]
fn evidence_short_of_any_promise_is_refused_by_name() {
    assert_eq!(sound_evidence().refusal(true, 4), None);
    let cases: [(Evidence, &str); 8] = [
        (
            Evidence {
                no_new_privs: false,
                ..sound_evidence()
            },
            "no_new_privs",
        ),
        (
            Evidence {
                seccomp_mode: 0,
                ..sound_evidence()
            },
            "seccomp mode is 0",
        ),
        (
            Evidence {
                listener_live: false,
                ..sound_evidence()
            },
            "listener",
        ),
        (
            Evidence {
                cap_effective: 1 << 21,
                ..sound_evidence()
            },
            "effective",
        ),
        (
            Evidence {
                cap_permitted: 1,
                ..sound_evidence()
            },
            "permitted",
        ),
        (
            Evidence {
                cap_ambient: 1,
                ..sound_evidence()
            },
            "ambient",
        ),
        (
            Evidence {
                euid: 0,
                cap_bounding: 0x1ff,
                ..sound_evidence()
            },
            "bounding set",
        ),
        (
            Evidence {
                landlock_enforced: false,
                ..sound_evidence()
            },
            "Landlock",
        ),
    ];
    for (evidence, named) in cases {
        let why = evidence.refusal(true, 4).unwrap_or_default();
        assert!(why.contains(named), "{named}: {why}");
    }
    assert!(sound_evidence().refusal(true, 8).is_some(), "ABI 7 < 8");
    let no_landlock = Evidence {
        landlock_abi: 0,
        landlock_enforced: false,
        ..sound_evidence()
    };
    assert_eq!(no_landlock.refusal(false, 4), None, "best effort");
    let root = Evidence {
        uid: 0,
        euid: 0,
        ..sound_evidence()
    };
    assert_eq!(
        root.refusal(true, 4),
        None,
        "root with an empty bounding set"
    );
}

#[test]
fn evidence_links_round_trip_and_bad_ones_are_refused() {
    let b = binding();
    let linked = FromSandbox::Evidence(Evidence {
        links: vec![("/usr/bin/python3".into(), "/usr/bin/python3.11".into())],
        ..sound_evidence()
    });
    let bytes = linked.to_pb(&b).encode_to_vec();
    assert_eq!(decode_sandbox_message(&bytes, &b), Ok(linked));
    let long = format!("/{}", "a".repeat(MAX_PATH));
    let many: Vec<(String, String)> = (0..=MAX_LINKS / 2048)
        .map(|i| (format!("/{i:01023}"), format!("/{i:01023}")))
        .collect();
    let cases = [
        (
            vec![("python3".into(), "/usr/bin/python3.11".into())],
            "not an absolute path",
        ),
        (
            vec![("/usr/bin/python3".into(), String::new())],
            "not an absolute path",
        ),
        (vec![("/x".into(), long)], "links.target"),
        (many, "links"),
    ];
    for (links, why) in cases {
        let m = FromSandbox::Evidence(Evidence {
            links,
            ..sound_evidence()
        });
        let bytes = m.to_pb(&b).encode_to_vec();
        let err = decode_sandbox_message(&bytes, &b).unwrap_err().to_string();
        assert!(err.contains(why), "{why}: {err}");
    }
}

fn exec(n: u64) -> ExecRequest {
    ExecRequest {
        exec_id: id(n),
        argv: vec![b"git".to_vec(), b"fetch".to_vec()],
        env: vec![b"GIT_TRACE=1".to_vec()],
        workdir: Some(b"/work".to_vec()),
        timeout: Some(std::time::Duration::from_millis(1500)),
    }
}

#[test]
fn an_exec_request_and_its_stream_come_back_as_sent() {
    let b = binding();
    let request = FromSupervisor::Exec(exec(4));
    assert_eq!(FromSupervisor::check(request.to_pb(&b), &b), Ok(request));
    for up in [
        ExecUpKind::Started(id(4)),
        ExecUpKind::Failed {
            exec_id: id(4),
            reason: "no such program".into(),
        },
        ExecUpKind::Stdout(b"out".to_vec()),
        ExecUpKind::Stderr(b"err".to_vec()),
        ExecUpKind::Exited {
            status: 137,
            timed_out: true,
        },
    ] {
        assert_eq!(ExecUpKind::check(up.clone().into_pb(&b), &b), Ok(up));
    }
    let cancel = ExecDownKind::Cancel.to_pb(&b);
    assert_eq!(ExecDownKind::check(cancel, &b), Ok(ExecDownKind::Cancel));
}

#[test]
fn a_malformed_exec_request_is_refused_by_name() {
    let b = binding();
    type Spoil = fn(&mut pb::ExecRequest);
    let cases: [(Spoil, &str); 7] = [
        (|e| e.exec_id = 0, "exec_id"),
        (|e| e.argv.clear(), "argv"),
        (|e| e.argv[0].clear(), "argv"),
        (|e| e.argv.push(b"a\0b".to_vec()), "argv"),
        (|e| e.env.push(b"=value".to_vec()), "env"),
        (|e| e.env.push(b"NOVALUE".to_vec()), "env"),
        (|e| e.workdir = b"relative".to_vec(), "workdir"),
    ];
    for (spoil, field) in cases {
        let mut msg = FromSupervisor::Exec(exec(1)).to_pb(&b);
        let Some(pb::supervisor_message::Kind::Exec(e)) = &mut msg.kind else {
            unreachable!()
        };
        spoil(e);
        let err = FromSupervisor::check(msg, &b).unwrap_err();
        assert!(err.to_string().contains(field), "{field}: {err}");
    }
    let long = pb::ExecUp {
        binding: Some(b.to_pb()),
        kind: Some(pb::exec_up::Kind::Stdout(vec![0; MAX_CHUNK + 1])),
    };
    assert!(ExecUpKind::check(long, &b).is_err());
    let exited = pb::ExecUp {
        binding: Some(b.to_pb()),
        kind: Some(pb::exec_up::Kind::Exited(pb::ExecExited {
            exit_status: 256,
            timed_out: false,
        })),
    };
    assert!(ExecUpKind::check(exited, &b).is_err());
}

#[test]
fn exec_requests_follow_the_go_with_growing_ids() {
    let mut order = ControlOrder::new();
    order.request(&hello()).unwrap();
    order.answer(&WELCOME).unwrap();
    order
        .request(&FromSandbox::Evidence(sound_evidence()))
        .unwrap();
    assert!(order.answer(&FromSupervisor::Exec(exec(1))).is_err());
    order.answer(&FromSupervisor::Go).unwrap();
    order.answer(&FromSupervisor::Exec(exec(1))).unwrap();
    order.answer(&FromSupervisor::Exec(exec(5))).unwrap();
    assert!(order.answer(&FromSupervisor::Exec(exec(5))).is_err());
    assert!(order.answer(&FromSupervisor::Exec(exec(2))).is_err());
    order.request(&FromSandbox::Ended(0)).unwrap();
    assert!(order.answer(&FromSupervisor::Exec(exec(6))).is_err());
}

#[test]
fn an_exec_stream_keeps_its_order() {
    let started = ExecUpKind::Started(id(1));
    let out = ExecUpKind::Stdout(b"x".to_vec());
    let exited = ExecUpKind::Exited {
        status: 0,
        timed_out: false,
    };
    let mut order = ExecOrder::new();
    assert!(order.up(&out).is_err());
    let mut order = ExecOrder::new();
    order.up(&started).unwrap();
    assert!(order.up(&started).is_err());
    order.up(&out).unwrap();
    order.up(&ExecUpKind::Stderr(b"y".to_vec())).unwrap();
    assert!(!order.done());
    order.up(&exited).unwrap();
    assert!(order.done());
    assert!(order.up(&out).is_err());
    let mut order = ExecOrder::new();
    order
        .up(&ExecUpKind::Failed {
            exec_id: id(1),
            reason: "gone".into(),
        })
        .unwrap();
    assert!(order.done());
    assert!(order.up(&exited).is_err());
}

fn launch(bytes: usize) -> FromSupervisor {
    FromSupervisor::Welcome {
        launch: Some(vec![b'x'; bytes]),
    }
}

/// A sandbox started from a kit says so with an empty digest, and only
/// its Welcome may carry a launch: one that has its plan is never handed
/// another, and one that waits never goes on without it.
#[test]
fn a_welcome_carries_a_launch_exactly_when_the_hello_waits_for_one() {
    let waiting = FromSandbox::Hello {
        bundle_digest: None,
    };
    let mut order = ControlOrder::new();
    order.request(&waiting).unwrap();
    assert_eq!(
        order.answer(&WELCOME),
        Err(ProtocolError::Order(
            "a Welcome without the launch the Hello waits for"
        ))
    );
    let mut order = ControlOrder::new();
    order.request(&waiting).unwrap();
    order.answer(&launch(10)).unwrap();
    assert!(order.answer(&launch(10)).is_err(), "a second Welcome");

    let mut order = ControlOrder::new();
    order.request(&hello()).unwrap();
    assert_eq!(
        order.answer(&launch(10)),
        Err(ProtocolError::Order(
            "a Welcome with a launch, to a sandbox that has its plan"
        ))
    );
    let mut order = ControlOrder::new();
    order.request(&hello()).unwrap();
    order.answer(&WELCOME).unwrap();
}

/// The launch is bounded like every field, and an empty one is none: the
/// wire cannot tell them apart.
#[test]
fn a_launch_is_bounded_and_an_empty_one_is_none() {
    let b = binding();
    let welcome =
        |bytes: usize| decode_supervisor_message(&launch(bytes).to_pb(&b).encode_to_vec(), &b);
    assert_eq!(welcome(MAX_LAUNCH), Ok(launch(MAX_LAUNCH)));
    assert_eq!(
        welcome(MAX_LAUNCH + 1),
        Err(ProtocolError::TooLong {
            field: "launch",
            len: MAX_LAUNCH + 1,
            max: MAX_LAUNCH,
        })
    );
    assert!(launch(MAX_LAUNCH).to_pb(&b).encode_to_vec().len() <= MAX_MESSAGE);
    assert_eq!(welcome(0), Ok(WELCOME));
    let empty = FromSandbox::Hello {
        bundle_digest: Some(String::new()),
    };
    assert_eq!(
        decode_sandbox_message(&empty.to_pb(&b).encode_to_vec(), &b),
        Ok(FromSandbox::Hello {
            bundle_digest: None
        })
    );
}
