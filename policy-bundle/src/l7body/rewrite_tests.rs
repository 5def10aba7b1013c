use super::*;

const A: &str = "openshell-placeholder-a-0123456789abcdef0123456789abcdef";
const AB: &str = "openshell-placeholder-a-b-0123456789abcdef0123456789abcdef";

/// Knows `A` (secret `s1`) and `AB` (secret `s 2&`), longest first.
fn known(text: &str) -> Result<Found<'static>, RewriteRefusal> {
    [(AB, "ab", "s 2&"), (A, "a", "s1")]
        .into_iter()
        .find(|(p, _, _)| text.starts_with(p))
        .map(|(p, credential, secret)| Found {
            len: p.len(),
            credential,
            secret,
        })
        .ok_or(RewriteRefusal::NotBound)
}

fn run(ct: Option<&str>, body: &str) -> Result<Rewritten<'static>, RewriteRefusal> {
    rewrite_body(ct, body.as_bytes(), &known)
}

#[test]
fn json_and_text_get_each_secret_verbatim() {
    let body = format!(r#"{{"k":"{A}","l":"x{AB}y","m":"{A}"}}"#);
    let r = run(Some("application/json"), &body).unwrap();
    assert_eq!(
        r.body.as_deref(),
        Some(r#"{"k":"s1","l":"xs 2&y","m":"s1"}"#)
    );
    assert_eq!(r.credentials, ["a", "ab"]);
    let r = run(Some("text/plain"), &format!("token {A}")).unwrap();
    assert_eq!(r.body.as_deref(), Some("token s1"));
}

#[test]
fn the_media_type_is_read_up_to_its_parameters_whatever_the_charset() {
    for ct in [
        "application/json; charset=utf-8",
        "Application/JSON",
        " text/csv ;charset=iso-8859-1",
        "text/html",
    ] {
        let r = run(Some(ct), A).unwrap();
        assert_eq!(r.body.as_deref(), Some("s1"), "{ct}");
    }
    assert_eq!(
        BodyKind::of(Some("application/vnd.api+json")),
        BodyKind::Other
    );
    assert_eq!(BodyKind::of(None), BodyKind::Other);
}

#[test]
fn a_form_value_is_decoded_replaced_and_encoded_again() {
    let encoded_ab = AB.replace('-', "%2D");
    let body = format!("a=1+2&token={A}&other=x%2By&t2=pre+{encoded_ab}&flag");
    let r = run(Some("application/x-www-form-urlencoded"), &body).unwrap();
    assert_eq!(
        r.body.as_deref(),
        Some("a=1+2&token=s1&other=x%2By&t2=pre+s+2%26&flag")
    );
    assert_eq!(r.credentials, ["a", "ab"]);
    assert_eq!(
        run(Some("application/x-www-form-urlencoded"), &format!("{A}=1")),
        Err(RewriteRefusal::InFieldName)
    );
    assert_eq!(
        run(
            Some("application/x-www-form-urlencoded"),
            &format!("a=%FF&b={A}")
        ),
        Err(RewriteRefusal::NotUtf8)
    );
}

#[test]
fn bodies_without_a_placeholder_go_on_unchanged() {
    for (ct, body) in [
        (Some("application/json"), r#"{"a":1}"#),
        (Some("application/octet-stream"), "openshell-placeholder"),
        (None, "plain"),
        (Some("text/plain"), ""),
    ] {
        assert_eq!(run(ct, body), Ok(Rewritten::default()), "{ct:?} {body}");
    }
}

#[test]
fn refusals_are_openshells() {
    let unknown = "openshell-placeholder-a-ffffffffffffffffffffffffffffffff";
    assert_eq!(
        run(Some("application/json"), &format!("{A} {unknown}")),
        Err(RewriteRefusal::NotBound)
    );
    assert_eq!(
        run(Some("application/octet-stream"), A),
        Err(RewriteRefusal::Unsupported {
            content_type: Some("application/octet-stream".into())
        })
    );
    assert!(matches!(
        run(None, A),
        Err(RewriteRefusal::Unsupported { content_type: None })
    ));
    // A supported type must be UTF-8 even without a placeholder.
    assert_eq!(
        rewrite_body(Some("text/plain"), b"\xff\xfe", &known),
        Err(RewriteRefusal::NotUtf8)
    );
    // Percent-encoded in JSON: nothing replaces it, and it is not sent on.
    assert_eq!(
        run(Some("application/json"), &A.replace("o", "%6F")),
        Err(RewriteRefusal::Unresolved)
    );
    let big = "x".repeat(REWRITE_BODY_LIMIT + 1);
    assert!(matches!(
        run(Some("text/plain"), &big),
        Err(RewriteRefusal::TooLarge { .. })
    ));
    assert!(run(Some("text/plain"), &big[1..]).is_ok());
}

#[test]
fn a_secret_that_looks_like_a_placeholder_is_not_sent_on() {
    let tricky = |t: &str| {
        t.starts_with(A)
            .then_some(Found {
                len: A.len(),
                credential: "a",
                secret: "openshell-placeholder-zz",
            })
            .ok_or(RewriteRefusal::NotBound)
    };
    assert_eq!(
        rewrite_body(Some("text/plain"), A.as_bytes(), &tricky),
        Err(RewriteRefusal::Unresolved)
    );
}

#[test]
fn the_callers_refusal_of_a_placeholder_is_the_bodys() {
    let outside = |t: &str| {
        if t.starts_with(A) {
            Err(RewriteRefusal::OutsideBinding {
                credential: "a".into(),
                method: "POST".into(),
                path: "/v1/write".into(),
            })
        } else {
            known(t)
        }
    };
    let why = RewriteRefusal::OutsideBinding {
        credential: "a".into(),
        method: "POST".into(),
        path: "/v1/write".into(),
    };
    for (ct, body) in [
        ("application/json", format!(r#"{{"k":"{AB}","l":"{A}"}}"#)),
        ("text/plain", A.to_owned()),
        ("application/x-www-form-urlencoded", format!("x=1&t={A}")),
    ] {
        assert_eq!(
            rewrite_body(Some(ct), body.as_bytes(), &outside),
            Err(why.clone()),
            "{ct}"
        );
    }
    assert_eq!(why.refusal_code(), "credential_not_bound");
    assert!(
        why.to_string().contains("does not cover POST /v1/write"),
        "{why}"
    );
}
