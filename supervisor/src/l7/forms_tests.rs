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

/// base64url (`-`, `_` where standard base64 has `+`, `/`), wrapped.
#[test]
fn wrapped_base64url_is_replaced() {
    let f = SecretForms::new(b"??>>real-secret-0123456789");
    let std = "xPz8+PnJlYWwt\nc2VjcmV0LTAxMjM0NTY3ODk=";
    let url = "xPz8-PnJlYWwt\r\nc2VjcmV0LTAxMjM0NTY3ODk=";
    for text in [std, url] {
        assert_eq!(
            f.replaced(text.as_bytes(), b"P").as_deref(),
            Some(&b"xPk="[..]),
            "{text}"
        );
    }
}

#[test]
fn a_short_secret_has_no_base64_forms() {
    let f = SecretForms::new(b"short");
    assert_eq!(f.literals.len(), 1, "hex only");
}

/// Laid-out hex and base64, and the escapes beyond the common ones: each
/// must be replaced whole (`P`), leaving what surrounds it.
const LAID_OUT: [(&str, &str); 28] = [
    // hex, grouped, either case, mixed case
    (
        "k=72:65:61:6c:2d:73:65:63:72:65:74:2d:30:31:32:33:34:35:36:37:38:39;",
        "k=P;",
    ),
    (
        "72 65 61 6C 2D 73 65 63 72 65 74 2D 30 31 32 33 34 35 36 37 38 39\n",
        "P\n",
    ),
    (
        "[0x72, 0x65, 0x61, 0x6c, 0x2d, 0x73, 0x65, 0x63, 0x72, 0x65, 0x74, 0x2d, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39]",
        "[0xP]",
    ),
    (
        "7265-616C-2d73-6563-7265-742D-3031-3233-3435-3637-3839",
        "P",
    ),
    // `xxd`: the ASCII column of the last line shows the tail as itself
    (
        "00000000: 4265 6172 6572 2072 6561 6c2d 7365 6372  Bearer real-secr\n00000010: 6574 2d30 3132 3334 3536 3738 390a       et-0123456789.\n",
        "00000000: 4265 6172 6572 20P.\n",
    ),
    (
        "00000000: 4265 6172 6572 2072 6561 6C2D 7365 6372  Bearer real-secr\r\n00000010: 6574 2D30 3132 3334 3536 3738 390A       et-0123456789.\r\n",
        "00000000: 4265 6172 6572 20P.\r\n",
    ),
    // `hexdump -C`
    (
        "00000000  42 65 61 72 65 72 20 72  65 61 6c 2d 73 65 63 72  |Bearer real-secr|\n00000010  65 74 2d 30 31 32 33 34  35 36 37 38 39 0a        |et-0123456789.|\n0000001e\n",
        "00000000  42 65 61 72 65 72 20 P.|\n0000001e\n",
    ),
    // `xxd -p -c 8`: hex wrapped, no offsets
    ("7265616c2d736563\n7265742d30313233\n343536373839\n", "P\n"),
    // base64 wrapped (PEM at 64, MIME at 76 with CRLF, any column), in
    // JSON, folded, base64url, percent-encoded
    (
        "QmVhcmVyIHJlYWwtc2Vj\ncmV0LTAxMjM0NTY3ODkgYW5k",
        "QmVhcmVyIHPkgYW5k",
    ),
    (
        "QmVhcmVyIHJlYWwtc2VjcmV0\r\nLTAxMjM0NTY3ODkgYW5k",
        "QmVhcmVyIHPkgYW5k",
    ),
    (
        "eEJlYXJlciByZWFsLXNlY3Jl\ndC0wMTIzNDU2Nzg5IGFu",
        "eEJlYXJlciBPIGFu",
    ),
    (
        "eHlCZWFyZXIgcmVhbC1z\r\nZWNyZXQtMDEy\r\nMzQ1Njc4OSBhbmQ",
        "eHlCZWFyZXIgPSBhbmQ",
    ),
    (
        "\"eHlCZWFyZXIgcmVhbC1z\\nZWNyZXQtMDEyMzQ1Njc4OSBhbmQ\"",
        "\"eHlCZWFyZXIgPSBhbmQ\"",
    ),
    (
        "Subject: eHlCZWFyZXIgcmVhbC1z\r\n ZWNyZXQtMDEyMzQ1Njc4OSBh",
        "Subject: eHlCZWFyZXIgPSBh",
    ),
    ("-_9yZWFsLXNlY3Jl\ndC0wMTIzNDU2Nzg5_w==", "-_9P_w=="),
    (
        "q=eEJlYXJlciByZWFsLXNlY3JldC0wMTIzNDU2Nzg5IGFu%2BA",
        "q=eEJlYXJlciBPIGFu%2BA",
    ),
    // numeric references with leading zeros, without `;`
    ("real&#0000045;secret&#x0002D;0123456789", "P"),
    ("&#0000114;&#x00065;&#X61;l-secret-0123456789", "P"),
    ("real&#45secret-0123456789<", "P<"),
    // octal, ES6/Rust braces, %u, \U
    ("real\\055secret\\0055\\060123456789", "P"),
    ("\\162eal-secret-0123456789", "P"),
    ("real\\u{2d}secret\\u{00002D}0123456789", "P"),
    ("real%u002Dsecret%u002d0123456789", "P"),
    ("real\\U0000002dsecret-0123456789", "P"),
    // the common ones still, mixed
    ("real\\x2dsecret\\u002d%30&#49;&#x32;3456789", "P"),
    ("%72eal%2Dsecret%2d0123456789", "P"),
    ("REAL&#45;SECRET\\-0123456789", "P"),
    ("%72%65al%u002dsecret\\055%30123456789", "P"),
];

#[test]
fn laid_out_and_rarely_escaped_forms_are_replaced() {
    for (text, want) in LAID_OUT {
        assert_eq!(scrubbed(text), want, "{text}");
    }
}

/// Ordinary text, dumps and base64 of other things, escapes of other
/// bytes, and near misses of each new form: nothing is touched.
#[test]
fn ordinary_text_is_left_alone() {
    let table = [
        "The quick brown fox jumps over the lazy dog, 0123456789 times.",
        "real secret 0123456789",
        "real-secret-012345678 9",
        "72:65:61:6c:2d:73:65:63:72:65:74:2d:30:31:32:33:34:35:36:37:38",
        "7 265616c2d7365637265742d30313233343536373839",
        "72 65 61 6c 2d 73 65 63 72 65 74 2d 30 31 32 33 34 35 36 37 38 3a",
        "7265616c2d73656372\n\n\n65742d30313233343536373839",
        "00000000: 4865 6c6c 6f2c 2077 6f72 6c64 0a        Hello, world.\n",
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ0VSVElGSUNBVEUgRVhBTVBMRTAKBggqhkjOPQQDAjAP\n-----END CERTIFICATE-----",
        "QmVhcmVyIHJlYWwtc2Vj\n\ncmV0LTAxMjM0NTY3ODkgYW5k",
        "QmVhcmVyIHJlYWwtc2Vj cmV0LTAxMjM0NTY3ODkgYW5k",
        "real&#000000000000000000000000000000000045;secret-0123456789",
        "real\\u{2d secret-0123456789",
        "real%u2dsecret-0123456789",
        "real\\55;secret-0123456789x",
        "&#65; &#x41; \\101 \\u{41} %u0041 \\x41 %41 &amp;&lt;",
    ];
    for text in table {
        assert_eq!(scrubbed(text), text);
    }
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
    for text in texts.into_iter().chain(LAID_OUT.map(|(text, _)| text)) {
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
