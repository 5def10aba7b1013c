//! `docs/openapi.yaml` against the real server, on SQLite and PostgreSQL:
//! the routes it documents are the routes the server answers, and every
//! answer of a realistic session (its status and its JSON body) is one the
//! document gives for that operation. The checker itself is tested on
//! wrong documents and wrong answers, so that it cannot pass by accident.

// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use bundle_trust::client::{Client, Response};
use common::*;
use gateway::server::ApprovalMode;
use serde_json::{Value, json};

/// Answered by the server itself, before `api::route`.
const SERVER_ROUTES: &[(&str, &str)] =
    &[("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics")];

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The OpenAPI document and validators for the schemas in it, built once
/// each.
#[derive(Clone)]
struct Doc {
    root: Arc<Value>,
    validators: Arc<Mutex<HashMap<String, Arc<jsonschema::Validator>>>>,
}

fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

impl Doc {
    fn load() -> Doc {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.yaml");
        let text = std::fs::read_to_string(path).unwrap();
        let root: Value = serde_yaml::from_str(&text).unwrap();
        Doc::new(root)
    }

    fn new(root: Value) -> Doc {
        Doc {
            root: Arc::new(root),
            validators: Arc::default(),
        }
    }

    /// Every `(METHOD, template)` the document has an operation for.
    fn routes(&self) -> BTreeSet<(String, String)> {
        let mut out = BTreeSet::new();
        for (template, item) in self.root["paths"].as_object().unwrap() {
            for m in METHODS {
                if item.get(*m).is_some() {
                    out.insert((m.to_uppercase(), template.clone()));
                }
            }
        }
        out
    }

    /// A validator for the schema at `pointer` (a JSON pointer into the
    /// document). The schema is placed in a copy of the whole document, the
    /// root resource, so its `#/components/...` references resolve there.
    fn validator(&self, pointer: &str) -> Result<Arc<jsonschema::Validator>, String> {
        if let Some(v) = self.validators.lock().unwrap().get(pointer) {
            return Ok(Arc::clone(v));
        }
        let schema = self
            .root
            .pointer(pointer)
            .ok_or_else(|| format!("the document has nothing at `{pointer}`"))?
            .clone();
        let mut root = (*self.root).clone();
        let obj = root.as_object_mut().unwrap();
        obj.insert("$defs".into(), json!({ "target": schema }));
        obj.insert("$ref".into(), json!("#/$defs/target"));
        let v = jsonschema::draft202012::new(&root)
            .map_err(|e| format!("the schema at `{pointer}` does not compile: {e}"))?;
        let v = Arc::new(v);
        self.validators
            .lock()
            .unwrap()
            .insert(pointer.to_owned(), Arc::clone(&v));
        Ok(v)
    }

    fn validate(&self, pointer: &str, instance: &Value) -> Result<(), String> {
        let v = self.validator(pointer)?;
        let errors: Vec<String> = v
            .iter_errors(instance)
            .map(|e| format!("at `{}`: {e}", e.instance_path()))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "does not match the schema at `{pointer}`: {}",
                errors.join("; ")
            ))
        }
    }

    /// `(pointer, object)` of the object at `pointer`, following one
    /// local `$ref`.
    fn deref(&self, pointer: String) -> Result<(String, &Value), String> {
        let v = self
            .root
            .pointer(&pointer)
            .ok_or_else(|| format!("nothing at `{pointer}`"))?;
        match v.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let p = r
                    .strip_prefix('#')
                    .ok_or_else(|| format!("`{r}` is not a local reference"))?
                    .to_owned();
                let target = self
                    .root
                    .pointer(&p)
                    .ok_or_else(|| format!("`{r}` (from `{pointer}`) names nothing"))?;
                Ok((p, target))
            }
            None => Ok((pointer, v)),
        }
    }

    fn operation(&self, method: &str, template: &str) -> Result<String, String> {
        let p = format!(
            "/paths/{}/{}",
            escape(template),
            method.to_ascii_lowercase()
        );
        match self.root.pointer(&p) {
            Some(_) => Ok(p),
            None => Err(format!("`{method} {template}` is not in the document")),
        }
    }

    /// `(in, name)` of every parameter of the operation, its path item's
    /// included.
    fn parameters(
        &self,
        method: &str,
        template: &str,
    ) -> Result<BTreeSet<(String, String)>, String> {
        let op = self.operation(method, template)?;
        let item = format!("/paths/{}", escape(template));
        let mut out = BTreeSet::new();
        for at in [item, op] {
            let Some(list) = self
                .root
                .pointer(&format!("{at}/parameters"))
                .and_then(Value::as_array)
            else {
                continue;
            };
            for i in 0..list.len() {
                let (_, p) = self.deref(format!("{at}/parameters/{i}"))?;
                let (Some(place), Some(name)) = (p["in"].as_str(), p["name"].as_str()) else {
                    return Err(format!("parameter {i} of `{at}` has no `in` or `name`"));
                };
                out.insert((place.to_owned(), name.to_owned()));
            }
        }
        Ok(out)
    }

    /// Whether each query parameter of `path` is one the operation
    /// documents.
    fn check_query(&self, method: &str, template: &str, path: &str) -> Result<(), String> {
        let Some((_, query)) = path.split_once('?') else {
            return Ok(());
        };
        let known = self.parameters(method, template)?;
        for pair in query.split('&') {
            let key = pair.split('=').next().unwrap_or_default();
            if !known.contains(&("query".to_owned(), key.to_owned())) {
                return Err(format!(
                    "`{method} {template}` has no query parameter `{key}` in the document"
                ));
            }
        }
        Ok(())
    }

    /// Whether `status` with `body` is an answer the document gives for
    /// the operation.
    fn check_response(
        &self,
        method: &str,
        template: &str,
        status: u16,
        body: &[u8],
    ) -> Result<(), String> {
        let op = self.operation(method, template)?;
        let at = format!("{op}/responses/{status}");
        if self.root.pointer(&at).is_none() {
            return Err(format!(
                "`{method} {template}` answered {status}, which the document does not give"
            ));
        }
        let (at, response) = self.deref(at)?;
        let Some(content) = response.get("content").and_then(Value::as_object) else {
            return if body.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "`{method} {template}` {status} has no body in the document, but one came"
                ))
            };
        };
        if content.contains_key("application/json") {
            let v: Value = serde_json::from_slice(body).map_err(|e| {
                format!("`{method} {template}` {status}: the body is not JSON ({e})")
            })?;
            return self
                .validate(&format!("{at}/content/application~1json/schema"), &v)
                .map_err(|e| format!("`{method} {template}` {status}: the body {e}\n{v:#}"));
        }
        if content.contains_key("text/plain") {
            let text = std::str::from_utf8(body)
                .map_err(|_| format!("`{method} {template}` {status}: the text is not UTF-8"))?;
            return self.validate(
                &format!("{at}/content/text~1plain/schema"),
                &Value::String(text.to_owned()),
            );
        }
        Err(format!(
            "`{method} {template}` {status}: no content type this check reads"
        ))
    }

    /// Whether `body` is a request body the document allows.
    fn check_request(&self, method: &str, template: &str, body: &Value) -> Result<(), String> {
        let op = self.operation(method, template)?;
        let at = format!("{op}/requestBody/content/application~1json/schema");
        if self.root.pointer(&at).is_none() {
            return Err(format!("`{method} {template}` takes no JSON body"));
        }
        self.validate(&at, body)
            .map_err(|e| format!("the request body of `{method} {template}` {e}"))
    }
}

/// The statuses answered, by `(method, template)`.
type Seen = BTreeMap<(String, String), BTreeSet<u16>>;

/// Sends requests and checks every answer against the document; counts
/// what was checked, by operation and status.
#[derive(Clone)]
struct Checked {
    doc: Doc,
    seen: Arc<Mutex<Seen>>,
}

impl Checked {
    fn new(doc: Doc) -> Self {
        Self {
            doc,
            seen: Arc::default(),
        }
    }

    async fn call_with(
        &self,
        c: &Client,
        method: &str,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Response {
        let r = c
            .send(method, path, body.as_ref(), headers, T)
            .await
            .unwrap();
        let bare = path.split('?').next().unwrap();
        let template = gateway::metrics::route_template(bare);
        if let Err(e) = self.doc.check_response(method, template, r.status, &r.body) {
            panic!("{method} {path}: {e}");
        }
        if let Err(e) = self.doc.check_query(method, template, path) {
            panic!("{method} {path}: {e}");
        }
        // What the server accepted, the document must accept too.
        if let Some(b) = &body
            && (200..300).contains(&r.status)
            && let Err(e) = self.doc.check_request(method, template, b)
        {
            panic!("{method} {path} was accepted: {e}");
        }
        self.seen
            .lock()
            .unwrap()
            .entry((method.to_owned(), template.to_owned()))
            .or_default()
            .insert(r.status);
        r
    }

    async fn call(&self, c: &Client, method: &str, path: &str, body: Option<Value>) -> Response {
        self.call_with(c, method, path, body, &[]).await
    }

    /// `call`, expecting `status`.
    async fn expect(
        &self,
        c: &Client,
        status: u16,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Value {
        let r = self.call(c, method, path, body).await;
        assert_eq!(r.status, status, "{method} {path}: {:?}", r.json());
        r.json()
    }
}

/// A path of `template` with each `{param}` filled in.
fn sample(template: &str) -> String {
    template
        .split('/')
        .map(|seg| match seg {
            "{name}" => "agent",
            "{rev}" | "{id}" if template.starts_with("/v1/proposals") => "1",
            "{rev}" => "1",
            "{id}" => "sb",
            other => other,
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn is_no_endpoint(r: &Response) -> bool {
    r.status == 404
        && r.json()["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("no endpoint"))
}

#[test]
fn the_document_documents_exactly_the_routes_the_server_has() {
    let doc = Doc::load();
    let server: BTreeSet<(String, String)> = gateway::api::ROUTES
        .iter()
        .chain(SERVER_ROUTES)
        .map(|(m, t)| ((*m).to_owned(), (*t).to_owned()))
        .collect();
    let documented = doc.routes();
    let missing: Vec<_> = server.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&server).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "not documented: {missing:?}; documented but not served: {extra:?}"
    );
    // Each template is the metrics label of its own paths.
    for (_, t) in &server {
        assert_eq!(gateway::metrics::route_template(&sample(t)), t);
    }
}

#[test]
fn every_schema_in_the_document_compiles_and_every_reference_resolves() {
    let doc = Doc::load();
    let mut refs = Vec::new();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r.clone());
                }
                m.values().for_each(|x| walk(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    walk(&doc.root, &mut refs);
    assert!(refs.len() > 50, "{}", refs.len());
    for r in &refs {
        let p = r.strip_prefix('#').unwrap();
        assert!(doc.root.pointer(p).is_some(), "`{r}` names nothing");
    }
    for name in doc.root["components"]["schemas"]
        .as_object()
        .unwrap()
        .keys()
    {
        doc.validator(&format!("/components/schemas/{name}"))
            .unwrap();
    }
    // Every operation lists the shared error shape for its refusals,
    // names its path parameters, and says which roles may call it.
    let mut ids = BTreeSet::new();
    for (m, t) in doc.routes() {
        let op = doc.operation(&m, &t).unwrap();
        let id = doc
            .root
            .pointer(&format!("{op}/operationId"))
            .unwrap()
            .to_string();
        assert!(ids.insert(id.clone()), "operationId {id} twice");
        let params = doc.parameters(&m, &t).unwrap();
        for seg in t.split('/') {
            if let Some(name) = seg.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
                assert!(
                    params.contains(&("path".to_owned(), name.to_owned())),
                    "{m} {t}: no path parameter `{name}`"
                );
            }
        }
        let open = doc.root.pointer(&format!("{op}/security")) == Some(&json!([]));
        assert_eq!(open, t == "/healthz" || t == "/readyz", "{m} {t}: security");
        let says = doc
            .root
            .pointer(&format!("{op}/description"))
            .and_then(Value::as_str);
        assert!(
            open || says.is_some_and(|d| d.contains("Roles:")),
            "{m} {t}: the description names no roles"
        );
        if !open {
            for role in roles(&doc, &m, &t) {
                let word = if role == "sandbox" {
                    "the sandbox"
                } else {
                    role.as_str()
                };
                assert!(
                    says.is_some_and(|d| d.contains(word)),
                    "{m} {t}: x-roles has `{role}`, the description does not"
                );
            }
        }
        for (status, _) in doc
            .root
            .pointer(&format!("{op}/responses"))
            .unwrap()
            .as_object()
            .unwrap()
        {
            if status.starts_with('4') || (status.starts_with('5') && t != "/readyz") {
                let (at, _) = doc.deref(format!("{op}/responses/{status}")).unwrap();
                assert!(at.starts_with("/components/responses/"), "{m} {t} {status}");
            }
        }
    }
}

/// The checker refuses what it must: a status the document does not give,
/// a body that does not match (a missing field, an extra one, a wrong
/// type, an error of another shape), a body where none is documented, and
/// a route the document lacks.
#[test]
fn the_checker_fails_on_wrong_answers_and_wrong_documents() {
    let doc = Doc::load();
    let good = json!({"name": "alice", "role": "author", "token": "osg_x"}).to_string();
    doc.check_response("POST", "/v1/tokens", 201, good.as_bytes())
        .unwrap();
    let err = json!({"error": {"status": 409, "code": "conflict", "message": "taken"}}).to_string();
    doc.check_response("POST", "/v1/tokens", 409, err.as_bytes())
        .unwrap();

    let wrong = [
        (201, json!({"name": "alice", "role": "author"})),
        (
            201,
            json!({"name": "alice", "role": "author", "token": "osg_x", "hash": "h"}),
        ),
        (
            201,
            json!({"name": "alice", "role": "boss", "token": "osg_x"}),
        ),
        (201, json!({"name": 7, "role": "author", "token": "osg_x"})),
        (409, json!({"error": "taken"})),
        (409, json!({"error": {"status": 409, "code": "conflict"}})),
        (
            409,
            json!({"error": {"status": 409, "code": "conflict", "message": "m", "x": 1}}),
        ),
    ];
    for (status, body) in wrong {
        let r = doc.check_response("POST", "/v1/tokens", status, body.to_string().as_bytes());
        assert!(r.is_err(), "{status} {body} passed");
    }
    assert!(
        doc.check_response("POST", "/v1/tokens", 418, err.as_bytes())
            .unwrap_err()
            .contains("does not give")
    );
    assert!(
        doc.check_response("POST", "/v1/tokens", 201, b"not json")
            .is_err()
    );
    assert!(
        doc.check_response("GET", "/v1/nowhere", 200, b"{}")
            .is_err()
    );
    doc.check_query("GET", "/v1/audit", "/v1/audit?after=1&limit=2")
        .unwrap();
    doc.check_query(
        "GET",
        "/v1/sandboxes/{id}/bundle",
        "/v1/sandboxes/sb/bundle?wait=1&nonce=n",
    )
    .unwrap();
    assert!(
        doc.check_query("GET", "/v1/audit", "/v1/audit?page=2")
            .is_err()
    );
    assert!(
        doc.check_query("GET", "/v1/tokens", "/v1/tokens?limit=2")
            .is_err()
    );
    // 304 has no body; a body there is wrong.
    doc.check_response("GET", "/v1/sandboxes/{id}/bundle", 304, b"")
        .unwrap();
    assert!(
        doc.check_response("GET", "/v1/sandboxes/{id}/bundle", 304, b"{}")
            .is_err()
    );
    // A reference into components resolves: a proposal missing a field,
    // or with a verdict that is not one, fails.
    let proposal = |verdict: Value| {
        json!({
            "id": 1, "policy": "agent", "state": "pending", "base_revision": null,
            "base_digest": null, "format": "policy", "source": "s", "digest": null,
            "verdict": verdict, "proof": null, "diagnostics": null, "review_token": "rt_1",
            "proposer": "alice", "decided_by": null, "decision": null, "reason": null,
            "revision": null, "rollback_of": null, "created_at": 1, "version": 0,
            "awaiting_approval": true
        })
    };
    for ok in [json!(null), json!("new-reach"), json!("widened")] {
        doc.check_response(
            "GET",
            "/v1/proposals/{id}",
            200,
            proposal(ok).to_string().as_bytes(),
        )
        .unwrap();
    }
    let bad = proposal(json!("maybe")).to_string();
    assert!(
        doc.check_response("GET", "/v1/proposals/{id}", 200, bad.as_bytes())
            .is_err()
    );
    let mut missing = proposal(json!(null));
    missing.as_object_mut().unwrap().remove("awaiting_approval");
    assert!(
        doc.check_response(
            "GET",
            "/v1/proposals/{id}",
            200,
            missing.to_string().as_bytes()
        )
        .is_err()
    );
    // Request bodies: unknown fields are refused, as the server does.
    doc.check_request(
        "POST",
        "/v1/tokens",
        &json!({"name": "a", "role": "reader"}),
    )
    .unwrap();
    assert!(
        doc.check_request(
            "POST",
            "/v1/tokens",
            &json!({"name": "a", "role": "reader", "x": 1})
        )
        .is_err()
    );
    doc.check_request(
        "POST",
        "/v1/policies/{name}/proposals",
        &json!({"source": "s", "files": {"inc/a.policy": "text"}}),
    )
    .unwrap();

    // A document that is wrong: a reference to nothing fails to compile,
    // and a route set that differs is seen.
    let mut broken = (*doc.root).clone();
    broken["components"]["schemas"]["TokenInfo"] = json!({"$ref": "#/components/schemas/Nope"});
    let broken = Doc::new(broken);
    assert!(
        broken
            .check_response("GET", "/v1/tokens", 200, br#"{"tokens": []}"#)
            .is_err()
    );
    let mut fewer = (*doc.root).clone();
    fewer["paths"]
        .as_object_mut()
        .unwrap()
        .remove("/v1/audit/verify");
    assert_ne!(Doc::new(fewer).routes(), doc.routes());
}

// Every route of `api::ROUTES` reaches a handler (no `no endpoint`
// answer), every other method on its template does not, and the server's
// own routes answer; each answer is checked against the document.
both!(
    every_listed_route_is_dispatched_and_no_other,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let check = Checked::new(Doc::load());
        let listed: BTreeSet<(&str, &str)> = gateway::api::ROUTES.iter().copied().collect();
        for (method, template) in gateway::api::ROUTES {
            let path = sample(template);
            let body = (*method == "POST").then(|| json!({}));
            let r = check.call(&gw.admin, method, &path, body).await;
            assert!(!is_no_endpoint(&r), "{method} {path}: {:?}", r.json());
            for other in ["GET", "POST", "DELETE", "PUT", "PATCH"] {
                if listed.contains(&(other, template)) {
                    continue;
                }
                let r = gw.admin.send(other, &path, None, &[], T).await.unwrap();
                assert!(is_no_endpoint(&r), "{other} {path} answered {}", r.status);
            }
        }
        check.expect(&gw.admin, 200, "GET", "/healthz", None).await;
        check.expect(&gw.admin, 200, "GET", "/readyz", None).await;
        let m = check.call(&gw.admin, "GET", "/metrics", None).await;
        assert_eq!(m.status, 200);
    }
);

both!(
    a_session_answers_only_what_the_document_says,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Auto).await;
        let c = Checked::new(Doc::load());
        let admin = &gw.admin;

        // Tokens.
        let alice_t = c
            .expect(
                admin,
                201,
                "POST",
                "/v1/tokens",
                Some(json!({"name": "alice", "role": "author"})),
            )
            .await;
        let alice = admin.with_token(alice_t["token"].as_str().unwrap());
        let bob_t = c
            .expect(
                admin,
                201,
                "POST",
                "/v1/tokens",
                Some(json!({"name": "bob", "role": "author", "ttl_seconds": 3600})),
            )
            .await;
        let bob = admin.with_token(bob_t["token"].as_str().unwrap());
        let rita_t = c
            .expect(
                admin,
                201,
                "POST",
                "/v1/tokens",
                Some(json!({"name": "rita", "role": "reader"})),
            )
            .await;
        let rita = admin.with_token(rita_t["token"].as_str().unwrap());
        c.expect(
            admin,
            409,
            "POST",
            "/v1/tokens",
            Some(json!({"name": "rita", "role": "reader"})),
        )
        .await;
        c.expect(
            admin,
            400,
            "POST",
            "/v1/tokens",
            Some(json!({"name": "gateway", "role": "reader"})),
        )
        .await;
        let unknown = json!({"name": "zed", "role": "reader", "colour": "red"});
        c.expect(admin, 400, "POST", "/v1/tokens", Some(unknown.clone()))
            .await;
        assert!(c.doc.check_request("POST", "/v1/tokens", &unknown).is_err());
        c.expect(
            &rita,
            403,
            "POST",
            "/v1/tokens",
            Some(json!({"name": "zed", "role": "reader"})),
        )
        .await;
        let expired_t = c
            .expect(
                admin,
                201,
                "POST",
                "/v1/tokens",
                Some(json!({"name": "old", "role": "reader", "ttl_seconds": 0})),
            )
            .await;
        let expired = admin.with_token(expired_t["token"].as_str().unwrap());
        let e = c.expect(&expired, 401, "GET", "/v1/proposals", None).await;
        assert_eq!(e["error"]["code"], "token_expired");
        let nobody = admin.with_token("osg_nobody");
        c.expect(&nobody, 401, "GET", "/v1/proposals", None).await;
        c.expect(&nobody, 401, "GET", "/metrics", None).await;
        c.expect(&nobody, 200, "GET", "/healthz", None).await;

        // Proposals: a first revision, a widening, an invalid one, a narrowing
        // approved automatically.
        let propose = |src: String| json!({"source": src});
        c.expect(
            &rita,
            403,
            "POST",
            "/v1/policies/agent/proposals",
            Some(propose(BASE.into())),
        )
        .await;
        c.expect(
            admin,
            400,
            "POST",
            "/v1/policies/.bad/proposals",
            Some(propose(BASE.into())),
        )
        .await;
        c.expect(
            &alice,
            400,
            "POST",
            "/v1/policies/agent/proposals",
            Some(json!({"source": BASE, "format": "toml"})),
        )
        .await;
        let first = c
            .expect(
                &alice,
                201,
                "POST",
                "/v1/policies/agent/proposals",
                Some(propose(BASE.into())),
            )
            .await;
        let id1 = first["id"].as_i64().unwrap();
        c.expect(
            &alice,
            403,
            "POST",
            &format!("/v1/proposals/{id1}/approve"),
            Some(json!({"review_token": first["review_token"]})),
        )
        .await;
        c.expect(
            &bob,
            409,
            "POST",
            &format!("/v1/proposals/{id1}/approve"),
            Some(json!({"review_token": "rt_0"})),
        )
        .await;
        c.expect(
            &bob,
            200,
            "POST",
            &format!("/v1/proposals/{id1}/approve"),
            Some(json!({"review_token": first["review_token"]})),
        )
        .await;
        c.expect(
            &alice,
            422,
            "POST",
            "/v1/policies/agent/proposals",
            Some(propose(BASE.into())),
        )
        .await;
        let widening = c
            .expect(
                &alice,
                201,
                "POST",
                "/v1/policies/agent/proposals",
                Some(propose(wide())),
            )
            .await;
        assert_eq!(widening["verdict"], "widened");
        let invalid = c
            .expect(
                &alice,
                201,
                "POST",
                "/v1/policies/agent/proposals",
                Some(propose("policy \"agent\" { nonsense }".into())),
            )
            .await;
        assert_eq!(invalid["state"], "invalid");
        let narrowing = c
            .expect(
                &alice,
                201,
                "POST",
                "/v1/policies/agent/proposals",
                Some(propose(narrow())),
            )
            .await;
        assert_eq!(narrowing["decision"], "auto");
        let wid = widening["id"].as_i64().unwrap();
        c.expect(
            &bob,
            409,
            "POST",
            &format!("/v1/proposals/{wid}/approve"),
            Some(json!({"review_token": widening["review_token"]})),
        )
        .await;
        c.expect(
            &bob,
            200,
            "POST",
            &format!("/v1/proposals/{wid}/reject"),
            Some(json!({"reason": "writes are not needed"})),
        )
        .await;
        c.expect(
            &bob,
            409,
            "POST",
            &format!("/v1/proposals/{wid}/reject"),
            Some(json!({"reason": "again"})),
        )
        .await;
        c.expect(
            &bob,
            400,
            "POST",
            &format!("/v1/proposals/{wid}/reject"),
            Some(json!({})),
        )
        .await;
        c.expect(&rita, 200, "GET", "/v1/proposals", None).await;
        c.expect(&rita, 200, "GET", "/v1/proposals?policy=agent", None)
            .await;
        c.expect(&rita, 400, "GET", "/v1/proposals?policy=..", None)
            .await;
        c.expect(&rita, 200, "GET", &format!("/v1/proposals/{wid}"), None)
            .await;
        let inv = invalid["id"].as_i64().unwrap();
        c.expect(&rita, 200, "GET", &format!("/v1/proposals/{inv}"), None)
            .await;
        c.expect(&rita, 404, "GET", "/v1/proposals/999", None).await;
        c.expect(&rita, 400, "GET", "/v1/proposals/zero", None)
            .await;

        // Revisions and rollback.
        c.expect(&rita, 200, "GET", "/v1/policies/agent/revisions", None)
            .await;
        c.expect(&rita, 404, "GET", "/v1/policies/other/revisions", None)
            .await;
        c.expect(&rita, 200, "GET", "/v1/policies/agent/revisions/1", None)
            .await;
        c.expect(&rita, 404, "GET", "/v1/policies/agent/revisions/9", None)
            .await;
        c.expect(&rita, 400, "GET", "/v1/policies/agent/revisions/-1", None)
            .await;
        c.expect(
            &alice,
            404,
            "POST",
            "/v1/policies/agent/rollback",
            Some(json!({"revision": 9})),
        )
        .await;
        let back = c
            .expect(
                &alice,
                201,
                "POST",
                "/v1/policies/agent/rollback",
                Some(json!({"revision": 1})),
            )
            .await;
        assert_eq!(back["rollback_of"], 1);
        // Revision 1 reaches example.com again, without a credential: new
        // reach, which a person approves even in auto mode; approving it
        // again is `409`.
        assert_eq!(back["state"], "pending", "{back}");
        assert_eq!(back["verdict"], "new-reach", "{back}");
        let bid = back["id"].as_i64().unwrap();
        c.expect(
            &bob,
            200,
            "POST",
            &format!("/v1/proposals/{bid}/approve"),
            Some(json!({"review_token": back["review_token"]})),
        )
        .await;
        c.expect(
            &bob,
            409,
            "POST",
            &format!("/v1/proposals/{bid}/approve"),
            Some(json!({"review_token": back["review_token"]})),
        )
        .await;

        // Sandboxes, the bundle, status reports.
        c.expect(
            admin,
            404,
            "POST",
            "/v1/sandboxes",
            Some(json!({"id": "sb", "policy": "nope"})),
        )
        .await;
        let sb_t = c
            .expect(
                admin,
                201,
                "POST",
                "/v1/sandboxes",
                Some(json!({"id": "sb", "policy": "agent"})),
            )
            .await;
        let sb = admin.with_token(sb_t["token"].as_str().unwrap());
        c.expect(
            admin,
            409,
            "POST",
            "/v1/sandboxes",
            Some(json!({"id": "sb", "policy": "agent"})),
        )
        .await;
        c.expect(
            &alice,
            403,
            "POST",
            "/v1/sandboxes",
            Some(json!({"id": "sc", "policy": "agent"})),
        )
        .await;
        let other_t = c
            .expect(
                admin,
                201,
                "POST",
                "/v1/sandboxes",
                Some(json!({"id": "other", "policy": "agent", "ttl_seconds": 60})),
            )
            .await;
        let other = admin.with_token(other_t["token"].as_str().unwrap());
        c.expect(&other, 403, "GET", "/v1/sandboxes/sb/bundle", None)
            .await;
        c.expect(&rita, 403, "GET", "/v1/sandboxes/sb/bundle", None)
            .await;
        c.expect(&sb, 403, "GET", "/metrics", None).await;
        c.expect(&sb, 403, "GET", "/v1/proposals", None).await;
        c.expect(&sb, 400, "GET", "/v1/sandboxes/sb/bundle?wait=soon", None)
            .await;
        let env = c
            .expect(
                &sb,
                200,
                "GET",
                "/v1/sandboxes/sb/bundle?nonce=n-1-0123456789abcdef",
                None,
            )
            .await;
        assert_eq!(env["claims"]["nonce"], "n-1-0123456789abcdef");
        c.expect(&sb, 400, "GET", "/v1/sandboxes/sb/bundle?nonce=short", None)
            .await;
        let digest = env["claims"]["digest"].as_str().unwrap().to_owned();
        let revision = env["claims"]["revision"].as_i64().unwrap();
        let quoted = format!("\"{digest}\"");
        let same = c
            .call_with(
                &sb,
                "GET",
                "/v1/sandboxes/sb/bundle?wait=0",
                None,
                &[("if-none-match", &quoted)],
            )
            .await;
        assert_eq!(same.status, 304);
        c.expect(&sb, 200, "GET", "/v1/sandboxes/sb", None).await;
        c.expect(
            &rita,
            200,
            "GET",
            "/v1/sandboxes/sb?revision=1&wait=0",
            None,
        )
        .await;
        c.expect(&other, 403, "GET", "/v1/sandboxes/sb", None).await;
        c.expect(&rita, 404, "GET", "/v1/sandboxes/ghost", None)
            .await;
        let status = |rev: i64, d: &str, result: &str, error: Value| json!({"revision": rev, "digest": d, "result": result, "error": error});
        c.expect(
            &sb,
            422,
            "POST",
            "/v1/sandboxes/sb/status",
            Some(status(999, &digest, "applied", Value::Null)),
        )
        .await;
        c.expect(
            &sb,
            422,
            "POST",
            "/v1/sandboxes/sb/status",
            Some(status(revision, "sha256:bogus", "applied", Value::Null)),
        )
        .await;
        c.expect(
            &sb,
            400,
            "POST",
            "/v1/sandboxes/sb/status",
            Some(status(revision, &digest, "maybe", Value::Null)),
        )
        .await;
        c.expect(
            &other,
            403,
            "POST",
            "/v1/sandboxes/sb/status",
            Some(status(revision, &digest, "applied", Value::Null)),
        )
        .await;
        let s = c
            .expect(
                &sb,
                200,
                "POST",
                "/v1/sandboxes/sb/status",
                Some(status(
                    revision,
                    &digest,
                    "network_only",
                    json!("relaunch required"),
                )),
            )
            .await;
        assert_eq!(s["relaunch_required"], true);
        c.expect(
            &sb,
            200,
            "POST",
            "/v1/sandboxes/sb/status",
            Some(status(
                revision,
                &digest,
                "refused",
                json!("x".repeat(5000)),
            )),
        )
        .await;
        c.expect(&rita, 200, "GET", "/v1/sandboxes", None).await;
        c.expect(admin, 201, "POST", "/v1/sandboxes/sb/token", None)
            .await;
        let renewed = c
            .expect(
                admin,
                201,
                "POST",
                "/v1/sandboxes/sb/token",
                Some(json!({"ttl_seconds": 600})),
            )
            .await;
        assert!(renewed["expires_at"].is_i64());
        c.expect(&sb, 401, "GET", "/v1/sandboxes/sb/bundle", None)
            .await;
        c.expect(admin, 404, "POST", "/v1/sandboxes/ghost/token", None)
            .await;

        // Too large: a body over 1 MiB.
        let big = json!({"source": "x".repeat(1_100_000)});
        c.expect(
            &alice,
            413,
            "POST",
            "/v1/policies/agent/proposals",
            Some(big),
        )
        .await;

        // Token list and revocation.
        let list = c.expect(admin, 200, "GET", "/v1/tokens", None).await;
        assert!(list["tokens"].as_array().unwrap().len() >= 5);
        c.expect(&alice, 403, "GET", "/v1/tokens", None).await;
        c.expect(admin, 200, "DELETE", "/v1/tokens/rita", None)
            .await;
        c.expect(admin, 404, "DELETE", "/v1/tokens/rita", None)
            .await;
        c.expect(admin, 403, "DELETE", "/v1/tokens/admin", None)
            .await;
        c.expect(admin, 400, "DELETE", "/v1/tokens/%FF", None).await;
        c.expect(admin, 200, "DELETE", "/v1/tokens/sandbox%3Aother", None)
            .await;
        c.expect(&rita, 401, "GET", "/v1/audit", None).await;
        c.expect(admin, 200, "DELETE", "/v1/sandboxes/other", None)
            .await;
        c.expect(admin, 404, "DELETE", "/v1/sandboxes/other", None)
            .await;

        // Audit pages and the chain.
        let page = c.expect(&bob, 200, "GET", "/v1/audit?limit=5", None).await;
        assert_eq!(page["rows"].as_array().unwrap().len(), 5);
        let next = page["next"].as_i64().unwrap();
        c.expect(
            &bob,
            200,
            "GET",
            &format!("/v1/audit?after={next}&limit=1000"),
            None,
        )
        .await;
        c.expect(&bob, 200, "GET", "/v1/audit?limit=100000", None)
            .await;
        c.expect(&bob, 400, "GET", "/v1/audit?limit=0", None).await;
        c.expect(&bob, 400, "GET", "/v1/audit?after=-1", None).await;
        let v = c.expect(&bob, 200, "GET", "/v1/audit/verify", None).await;
        assert_eq!(v["ok"], true, "{v}");
        c.expect(&bob, 200, "GET", "/metrics", None).await;
        c.expect(&bob, 200, "GET", "/readyz", None).await;

        // Every operation was answered, with each status asked for above.
        let seen = c.seen.lock().unwrap().clone();
        let answered: BTreeSet<(String, String)> = seen.keys().cloned().collect();
        assert_eq!(answered, c.doc.routes(), "operations the session missed");
        let statuses: BTreeSet<u16> = seen.values().flatten().copied().collect();
        for s in [200, 201, 304, 400, 401, 403, 404, 409, 413, 422] {
            assert!(statuses.contains(&s), "no {s} in the session: {seen:?}");
        }
    }
);

/// A TLS connection to the gateway that writes whatever bytes it is given.
async fn raw(gw: &Gw) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    connect_raw(gw.running.addr, &gw.ca, "127.0.0.1")
        .await
        .unwrap()
}

/// One answer off a raw connection: status and body.
async fn read_raw(
    s: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
) -> (u16, Vec<u8>) {
    let (status, _, body) = read_raw_answer(s).await;
    (status, body)
}

// What no well-behaved client sends: a request hyper cannot parse, a head
// or a path too long, a body that never arrives. Each answer is checked
// against the document's operation for the path asked for.
both!(
    answers_to_broken_requests_are_documented_too,
    |b| async move {
        use tokio::io::AsyncWriteExt as _;
        let limits = gateway::app::ClientLimits {
            body_timeout: std::time::Duration::from_secs(1),
            ..quiet()
        };
        let gw = Gw::start_limited(b, limits).await;
        let doc = Doc::load();
        let token = std::fs::read_to_string(gw.path("admin.token")).unwrap();
        let token = token.trim();
        let cases: Vec<(&str, &str, Vec<u8>, u16)> = vec![
        (
            "GET",
            "/v1/audit",
            b"GET /v1/audit HTTP/1.1\r\nhost: a\r\nbad header\r\n\r\n".to_vec(),
            400,
        ),
        (
            "GET",
            "/healthz",
            format!("GET /healthz HTTP/1.1\r\nhost: a\r\nx: {}\r\n\r\n", "a".repeat(600_000))
                .into_bytes(),
            431,
        ),
        (
            "GET",
            "/v1/audit",
            format!("GET /v1/audit?x={} HTTP/1.1\r\nhost: a\r\n\r\n", "a".repeat(70_000))
                .into_bytes(),
            414,
        ),
        (
            "POST",
            "/v1/tokens",
            format!(
                "POST /v1/tokens HTTP/1.1\r\nhost: a\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\ncontent-length: 40\r\n\r\n{{\"name\""
            )
            .into_bytes(),
            408,
        ),
        (
            "POST",
            "/v1/tokens",
            format!(
                "POST /v1/tokens HTTP/1.1\r\nhost: a\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\ncontent-length: 7\r\n\r\n{{\"name\""
            )
            .into_bytes(),
            400,
        ),
    ];
        for (method, template, bytes, want) in cases {
            let mut s = raw(&gw).await;
            // A head over the limit is cut off while it is still sent.
            let _ = s.write_all(&bytes).await;
            let _ = s.flush().await;
            let (status, body) = tokio::time::timeout(T, read_raw(&mut s)).await.unwrap();
            assert_eq!(
                status,
                want,
                "{method} {template}: {}",
                String::from_utf8_lossy(&body)
            );
            if let Err(e) = doc.check_response(method, template, status, &body) {
                panic!("{e}");
            }
        }
    }
);

/// The roles an operation's `x-roles` lists.
fn roles(doc: &Doc, method: &str, template: &str) -> BTreeSet<String> {
    let op = doc.operation(method, template).unwrap();
    doc.root
        .pointer(&format!("{op}/x-roles"))
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("{method} {template} has no x-roles"))
        .iter()
        .map(|r| r.as_str().unwrap().to_owned())
        .collect()
}

// Each operation's `x-roles` is who the server serves: a token of a listed
// role is not refused with `403`, a token of any other role is (a
// sandbox's token asking about its own sandbox). Admin goes last: some of
// its requests change what the others would be asked about.
both!(x_roles_are_the_roles_the_server_serves, |b| async move {
    let gw = Gw::start(b, ApprovalMode::Manual).await;
    let check = Checked::new(Doc::load());
    let author = gw.person("alice", "author").await;
    let reader = gw.person("rita", "reader").await;
    propose(&author, "agent", BASE).await;
    let sandbox = gw.sandbox("sb", "agent").await;
    let ops: Vec<(&str, &str)> = gateway::api::ROUTES
        .iter()
        .copied()
        .chain([("GET", "/metrics")])
        .collect();
    for (role, token) in [
        ("reader", &reader),
        ("author", &author),
        ("sandbox", &sandbox),
        ("admin", &gw.admin),
    ] {
        for (method, template) in &ops {
            let allowed = roles(&check.doc, method, template).contains(role);
            let body = (*method == "POST").then(|| json!({}));
            let r = check.call(token, method, &sample(template), body).await;
            assert_eq!(
                r.status == 403,
                !allowed,
                "{role} on {method} {template}: {} {:?}",
                r.status,
                r.json()
            );
        }
    }
});

// Where the server refuses unknown fields, the document's request schema
// is closed too: each body the API takes is sent with a field no schema
// has, the server answers `400` naming it, and the document refuses it.
both!(
    request_bodies_are_closed_where_the_server_refuses_unknown_fields,
    |b| async move {
        let gw = Gw::start(b, ApprovalMode::Manual).await;
        let check = Checked::new(Doc::load());
        let mut bodies = 0;
        for (method, template) in gateway::api::ROUTES {
            let op = check.doc.operation(method, template).unwrap();
            let at = format!("{op}/requestBody/content/application~1json/schema");
            if check.doc.root.pointer(&at).is_none() {
                continue;
            }
            bodies += 1;
            let (_, schema) = check.doc.deref(at).unwrap();
            assert_eq!(
                schema["additionalProperties"],
                json!(false),
                "{method} {template}"
            );
            let body = json!({"zzz": 1});
            assert!(check.doc.check_request(method, template, &body).is_err());
            let r = check
                .call(&gw.admin, method, &sample(template), Some(body))
                .await;
            assert_eq!(r.status, 400, "{method} {template}: {:?}", r.json());
            let message = r.json()["error"]["message"].as_str().unwrap().to_owned();
            assert!(
                message.contains("unknown field `zzz`"),
                "{method} {template}: {message}"
            );
        }
        assert_eq!(bodies, 8);
    }
);

/// The database gone under a running gateway (PostgreSQL: the test's own
/// database dropped): `/readyz` and a request with a token answer `503`,
/// each as the document says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_without_a_database_are_documented_too() {
    use sqlx::Connection as _;
    let gw = Gw::start(Backend::Postgres, ApprovalMode::Manual).await;
    let check = Checked::new(Doc::load());
    check.expect(&gw.admin, 200, "GET", "/readyz", None).await;
    let (_, name) = gw.db.rsplit_once('/').unwrap();
    let mut conn = sqlx::PgConnection::connect(&postgres_base()).await.unwrap();
    sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .execute(&mut conn)
        .await
        .unwrap();
    let ready = check.expect(&gw.admin, 503, "GET", "/readyz", None).await;
    assert_eq!(ready["status"], "not_ready");
    let e = check
        .expect(&gw.admin, 503, "GET", "/v1/proposals", None)
        .await;
    assert_eq!(e["error"]["code"], "store_unavailable");
    check.expect(&gw.admin, 200, "GET", "/healthz", None).await;
}
