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
