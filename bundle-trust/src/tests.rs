use super::*;

const POLICY: &str =
    "policy \"p\" {\n  binaries tools = /usr/bin/curl\n  allow tools -> api.example.com:443\n}\n";

fn bundle_bytes(src: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.policy");
    std::fs::write(&path, src).unwrap();
    let (checked, bundle) = policy_lang::load::compile_file(&path, None).unwrap();
    let bundle = bundle.ok_or(checked.diagnostics).unwrap();
    String::from_utf8(bundle.to_bytes()).unwrap()
}

fn digest(bytes: &str) -> String {
    Bundle::from_slice(bytes.as_bytes()).unwrap().digest
}

fn sealed(key: &SigningKey, revision: i64, sandbox: &str) -> Envelope {
    let bytes = bundle_bytes(POLICY);
    let claims = Claims {
        digest: digest(&bytes),
        issued_at: 1_700_000_000,
        policy: "p".into(),
        revision,
        sandbox: sandbox.into(),
    };
    key.seal(claims, bytes)
}

fn trusted(keys: &[&SigningKey]) -> TrustedKeys {
    let text: String = keys.iter().map(|k| k.trust_line()).collect();
    TrustedKeys::parse(&text).unwrap()
}

#[test]
fn claims_serialize_with_sorted_keys_and_no_spaces() {
    let claims = Claims {
        digest: "sha256:ab".into(),
        issued_at: 7,
        policy: "p".into(),
        revision: 2,
        sandbox: "s".into(),
    };
    assert_eq!(
        String::from_utf8(claims.canonical()).unwrap(),
        r#"{"digest":"sha256:ab","issued_at":7,"policy":"p","revision":2,"sandbox":"s"}"#
    );
}

#[test]
fn a_sealed_envelope_verifies_and_each_tampering_is_refused() {
    let key = SigningKey::from_seed(&[7; 32]);
    let keys = trusted(&[&key]);
    let good = sealed(&key, 3, "sb");
    let ok = keys.verify(&good, "sb", Some(3)).unwrap();
    assert_eq!(ok.claims.revision, 3);
    assert_eq!(ok.bundle.digest, good.claims.digest);

    // One byte of the bundle changed: its digest no longer matches its content.
    let mut tampered = good.clone();
    tampered.bundle = tampered.bundle.replacen("443", "444", 1);
    assert!(matches!(
        keys.verify(&tampered, "sb", None),
        Err(TrustError::Bundle(_))
    ));
    // A whole other bundle, with a consistent digest, but not the signed one.
    let mut swapped = good.clone();
    swapped.bundle = bundle_bytes(&POLICY.replace("443", "444"));
    assert!(matches!(
        keys.verify(&swapped, "sb", None),
        Err(TrustError::DigestMismatch { .. })
    ));
    // A claim changed after signing.
    let mut claims = good.clone();
    claims.claims.revision = 9;
    assert_eq!(
        keys.verify(&claims, "sb", None).unwrap_err(),
        TrustError::BadSignature(key.id().to_owned())
    );
    // Another sandbox's envelope.
    assert!(matches!(
        keys.verify(&good, "other", None),
        Err(TrustError::WrongSandbox { .. })
    ));
    // Older than what is in force.
    assert!(matches!(
        keys.verify(&good, "sb", Some(4)),
        Err(TrustError::OlderRevision {
            offered: 3,
            applied: 4,
            ..
        })
    ));
}

#[test]
fn an_unknown_key_id_and_a_wrong_key_are_refused() {
    let key = SigningKey::from_seed(&[7; 32]);
    let other = SigningKey::from_seed(&[8; 32]);
    let keys = trusted(&[&key]);
    let by_other = sealed(&other, 1, "sb");
    assert_eq!(
        keys.verify(&by_other, "sb", None).unwrap_err(),
        TrustError::UnknownKey(other.id().to_owned())
    );
    // Signed by another key but claiming the trusted key's id.
    let mut forged = by_other;
    forged.key_id = key.id().to_owned();
    assert_eq!(
        keys.verify(&forged, "sb", None).unwrap_err(),
        TrustError::BadSignature(key.id().to_owned())
    );
}

#[test]
fn two_trusted_keys_both_verify_during_a_rotation() {
    let old = SigningKey::from_seed(&[1; 32]);
    let new = SigningKey::from_seed(&[2; 32]);
    let keys = trusted(&[&old, &new]);
    assert_eq!(keys.ids().count(), 2);
    keys.verify(&sealed(&old, 1, "sb"), "sb", None).unwrap();
    keys.verify(&sealed(&new, 2, "sb"), "sb", Some(1)).unwrap();
}

#[test]
fn key_files_round_trip_and_bad_files_are_refused() {
    let key = SigningKey::from_seed(&[5; 32]);
    let back = SigningKey::from_file(&key.to_file()).unwrap();
    assert_eq!(back.id(), key.id());
    assert!(SigningKey::from_file("ed25519-secret x AAAA").is_err());
    let wrong_id = key.to_file().replace(key.id(), "0000000000000000");
    assert!(SigningKey::from_file(&wrong_id).is_err());
    let line = key.trust_line().replace(key.id(), "0000000000000000");
    assert!(matches!(
        TrustedKeys::parse(&line),
        Err(TrustError::TrustFile { line: 1, .. })
    ));
    assert!(TrustedKeys::parse("# nothing\n").is_err());
    assert!(TrustedKeys::parse("id rsa:AAAA\n").is_err());
}

const NONCE: &str = "0123456789abcdef0123456789abcdef";

#[test]
fn the_nonce_is_signed_among_the_claims_and_left_out_when_absent() {
    let claims = Claims {
        digest: "sha256:ab".into(),
        issued_at: 7,
        policy: "p".into(),
        revision: 2,
        sandbox: "s".into(),
    };
    assert_eq!(claims.canonical_with(None), claims.canonical());
    assert_eq!(
        String::from_utf8(claims.canonical_with(Some(NONCE))).unwrap(),
        format!(
            r#"{{"digest":"sha256:ab","issued_at":7,"nonce":"{NONCE}","policy":"p","revision":2,"sandbox":"s"}}"#
        )
    );
    let key = SigningKey::from_seed(&[7; 32]);
    let with = key.seal_with_nonce(claims.clone(), Some(NONCE.into()), String::new());
    let wire = serde_json::to_value(&with).unwrap();
    assert_eq!(wire["claims"]["nonce"], NONCE, "{wire}");
    assert_eq!(parse_envelope(wire.to_string().as_bytes()).unwrap(), with);
    let without = key.seal(claims, String::new());
    let wire = serde_json::to_value(&without).unwrap();
    assert!(wire["claims"].get("nonce").is_none(), "{wire}");
}

#[test]
fn an_envelope_written_before_nonces_still_verifies() {
    // The JSON an older gateway writes: no `nonce` anywhere.
    let key = SigningKey::from_seed(&[7; 32]);
    let bytes = bundle_bytes(POLICY);
    let claims = Claims {
        digest: digest(&bytes),
        issued_at: 1_700_000_000,
        policy: "p".into(),
        revision: 3,
        sandbox: "sb".into(),
    };
    let signature = {
        use ed25519_dalek::Signer as _;
        let raw = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        B64.encode(raw.sign(&serde_json::to_vec(&claims).unwrap()).to_bytes())
    };
    let old = serde_json::json!({
        "claims": claims, "key_id": key.id(), "signature": signature, "bundle": bytes,
    });
    let envelope = parse_envelope(old.to_string().as_bytes()).unwrap();
    assert_eq!(envelope.nonce, None);
    let v = trusted(&[&key]).verify(&envelope, "sb", None).unwrap();
    assert_eq!(v.claims.revision, 3);
}

#[test]
fn a_nonce_added_removed_or_changed_after_signing_is_refused() {
    let key = SigningKey::from_seed(&[7; 32]);
    let keys = trusted(&[&key]);
    let plain = sealed(&key, 3, "sb");
    let with = key.seal_with_nonce(
        plain.claims.clone(),
        Some(NONCE.into()),
        plain.bundle.clone(),
    );
    assert_eq!(
        keys.verify(&with, "sb", None).unwrap().nonce.as_deref(),
        Some(NONCE)
    );
    let bad = TrustError::BadSignature(key.id().to_owned());
    // An attacker stamps the supervisor's nonce on a captured envelope.
    let mut stamped = plain.clone();
    stamped.nonce = Some(NONCE.into());
    assert_eq!(keys.verify(&stamped, "sb", None).unwrap_err(), bad);
    let mut changed = with.clone();
    changed.nonce = Some(NONCE.replace('0', "1"));
    assert_eq!(keys.verify(&changed, "sb", None).unwrap_err(), bad);
    let mut removed = with;
    removed.nonce = None;
    assert_eq!(keys.verify(&removed, "sb", None).unwrap_err(), bad);
}

#[test]
fn nonces_are_bounded_and_of_a_safe_charset() {
    assert!(valid_nonce(NONCE));
    assert!(valid_nonce("AZaz09-_AZaz09-_"));
    assert!(!valid_nonce("short"));
    assert!(!valid_nonce(&"a".repeat(MAX_NONCE_LEN + 1)));
    assert!(valid_nonce(&"a".repeat(MAX_NONCE_LEN)));
    assert!(!valid_nonce("0123456789abcdef\""));
    assert!(!valid_nonce("0123456789abcdef&x=1"));
    assert!(!valid_nonce("0123456789abcdéf0"));
    // A bad nonce in an envelope is a malformed envelope.
    let key = SigningKey::from_seed(&[7; 32]);
    let mut wire = serde_json::to_value(sealed(&key, 1, "sb")).unwrap();
    wire["claims"]["nonce"] = "x y".into();
    assert!(matches!(
        parse_envelope(wire.to_string().as_bytes()),
        Err(TrustError::Malformed(_))
    ));
    wire["claims"]["nonce"] = NONCE.into();
    wire["claims"]["extra"] = 1.into();
    assert!(parse_envelope(wire.to_string().as_bytes()).is_err());
}

#[test]
fn freshness_is_the_signed_nonce_or_else_the_age() {
    let key = SigningKey::from_seed(&[7; 32]);
    let keys = trusted(&[&key]);
    let plain = sealed(&key, 3, "sb");
    let issued = plain.claims.issued_at;
    let v = keys.verify(&plain, "sb", None).unwrap();
    // No nonce: the age decides.
    v.check_fresh(Some(NONCE), issued + 300, 300, 30).unwrap();
    v.check_fresh(None, issued - 30, 300, 30).unwrap();
    assert_eq!(
        v.check_fresh(Some(NONCE), issued + 301, 300, 30),
        Err(TrustError::Stale {
            age: 301,
            max_age: 300
        })
    );
    assert_eq!(
        v.check_fresh(Some(NONCE), issued - 31, 300, 30),
        Err(TrustError::FromTheFuture {
            ahead: 31,
            skew: 30
        })
    );
    // The nonce sent, signed: fresh whatever the clock says.
    let with = key.seal_with_nonce(
        plain.claims.clone(),
        Some(NONCE.into()),
        plain.bundle.clone(),
    );
    let v = keys.verify(&with, "sb", None).unwrap();
    v.check_fresh(Some(NONCE), issued + 100_000, 300, 30)
        .unwrap();
    // Another request's nonce: a replay, even a recent one.
    let other = NONCE.replace('a', "b");
    assert_eq!(
        v.check_fresh(Some(&other), issued, 300, 30),
        Err(TrustError::NonceMismatch)
    );
    assert_eq!(
        v.check_fresh(None, issued, 300, 30),
        Err(TrustError::NonceMismatch)
    );
    // Extreme clocks do not overflow.
    let mut far = plain.claims.clone();
    far.issued_at = i64::MIN;
    let v = keys
        .verify(&key.seal(far, plain.bundle.clone()), "sb", None)
        .unwrap();
    assert!(v.check_fresh(None, i64::MAX, 300, 30).is_err());
}
