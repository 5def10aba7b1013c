use super::*;

const SECRET: &str = "real-secret-0123456789";

fn forms() -> SecretForms {
    SecretForms::new(SECRET.as_bytes())
}

fn scrubbed(text: &str) -> String {
    let f = forms();
    match f.replaced(text.as_bytes(), b"P") {
        Some(out) => String::from_utf8(out).unwrap(),
        None => text.to_owned(),
    }
}

#[test]
fn every_echoed_form_of_the_secret_is_replaced() {
    let table = [
        // as sent, and in another case (a lowercased header name)
        ("a real-secret-0123456789 b", "a P b"),
        ("x-REAL-SECRET-0123456789", "x-P"),
        // percent-encoded, wholly or in part, either hex case
        ("u=real%2Dsecret%2d0123456789", "u=P"),
        (
            "%72%65%61%6c%2d%73%65%63%72%65%74%2d%30%31%32%33%34%35%36%37%38%39",
            "P",
        ),
        // JSON, C and HTML escapes
        ("\"real\\u002dsecret\\x2d0123456789\"", "\"P\""),
        ("real\\-secret-0123456789", "P"),
        ("real&#45;secret&#x2D;0123456789;", "P;"),
        // hex
        ("7265616c2d7365637265742d30313233343536373839", "P"),
        ("7265616C2D7365637265742D30313233343536373839", "P"),
        // base64 of longer texts holding it, at each of the three offsets
        ("QmVhcmVyIHJlYWwtc2VjcmV0LTAxMjM0NTY3ODk=", "QmVhcmVyIHPk="),
        ("eEJlYXJlciByZWFsLXNlY3JldC0wMTIzNDU2Nzg5", "eEJlYXJlciBP"),
        ("eyJhIjoicmVhbC1zZWNyZXQtMDEyMzQ1Njc4OSJ9", "eyJhIjoiPSJ9"),
        // not the secret
        ("real-secret-012345678", "real-secret-012345678"),
        ("%zz&#;\\q&amp+", "%zz&#;\\q&amp+"),
    ];
    for (text, want) in table {
        assert_eq!(scrubbed(text), want, "{text}");
    }
}

#[test]
fn a_secret_holding_escape_characters_is_found_either_way() {
    let f = SecretForms::new(b"a%41&b+c\\d-xyz");
    for text in [
        "a%41&b+c\\d-xyz",
        "a%2541%26b%2Bc%5Cd-xyz",
        "a%41&amp;b+c\\\\d-xyz",
    ] {
        assert!(f.found_in(text.as_bytes()), "{text}");
    }
    assert!(!f.found_in(b"aA&b+c\\d-xyz"));
}

#[test]
fn a_short_secret_has_no_base64_forms() {
    let f = SecretForms::new(b"short");
    assert_eq!(f.literals.len(), 2, "hex and itself only");
}

/// Split anywhere, an occurrence is never released before it is complete:
/// what is decided at each cut holds no part of one.
#[test]
fn an_occurrence_split_across_pieces_is_held_back_until_decided() {
    let f = forms();
    let texts = [
        "ab real%2dsecret-0123456789 cd",
        "ab real&#x2d;secret\\u002d0123456789",
        "eyJhIjoicmVhbC1zZWNyZXQtMDEyMzQ1Njc4OSJ9",
    ];
    for text in texts {
        let whole = f.scan(text.as_bytes(), true);
        assert_eq!(whole.found.len(), 1, "{text}");
        let occurrence = whole.found[0].clone();
        for cut in 0..=text.len() {
            let part = f.scan(&text.as_bytes()[..cut], false);
            assert!(
                part.decided <= occurrence.start || part.decided >= occurrence.end,
                "cut {cut} of {text}: decided up to {}",
                part.decided
            );
            if cut < occurrence.end {
                assert!(part.found.is_empty(), "cut {cut} of {text}");
            }
        }
    }
}

#[test]
fn text_without_candidates_is_decided_whole() {
    let f = forms();
    let s = f.scan(b"nothing to see here", false);
    assert!(s.found.is_empty());
    assert_eq!(s.decided, 17, "`re` may start the secret");
    let s = f.scan(b"!!!!", false);
    assert_eq!(s.decided, 4);
    let s = f.scan(b"ends with rea", false);
    assert_eq!(s.decided, 10, "`rea` may start the secret");
    let s = f.scan(b"ends with %", false);
    assert_eq!(s.decided, 10);
}

#[test]
fn an_empty_secret_matches_nothing() {
    let f = SecretForms::new(b"");
    assert!(!f.found_in(b"anything %41 &amp; at all"));
}
