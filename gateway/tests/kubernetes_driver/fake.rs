//! An API server played in memory behind kube's client (tower-test's
//! mock transport): the Pods, Secrets and NetworkPolicies of one
//! namespace, with what only a server checks enforced (a name taken, an
//! owner reference without a uid, an immutable Secret changed, a
//! scheduling gate added, a uid precondition that does not hold), the
//! defaults it fills in, garbage collection of owned objects, and a
//! kubelet that schedules a Pod once its gates are gone. Every request is
//! recorded, and one can be made to fail or never be answered.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::{BodyExt as _, Full};
use kube::client::Body;
use serde_json::{Value, json};

/// Changes a Pod as admission would, at its creation.
pub type Admission = Box<dyn Fn(&mut Value) + Send>;

/// What runs a Pod once its gates are gone, and says how it is.
pub trait Kubelet: Send + Sync {
    /// Starts `pod` (as stored) with the Secrets of its namespace; must
    /// not wait for it to run.
    fn start(&self, pod: &Value, secrets: &[Value]);
    /// The Pod's `status` now.
    fn status(&self, pod: &str) -> Value;
    /// Stops the Pod and forgets it; returns once nothing of it runs.
    fn remove(&self, pod: &str);
}

/// A kubelet played in memory: it runs nothing, and says at once what
/// it was told to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Played {
    /// Runs it: an IP, `Running`, and a supervisor Pod `Ready`.
    Runs,
    /// Runs it, but a supervisor Pod never becomes `Ready`.
    NeverReady,
    /// The workload Pod fails as it starts.
    WorkloadFails,
    /// Gives it an IPv6 address.
    RunsOnIpv6,
    /// Runs both Pods, which end with this exit status before a
    /// readiness probe sees the supervisor ready: the supervisor first,
    /// the workload a read later.
    EndsAtOnce(i32),
}

#[derive(Default)]
struct State {
    /// By (resource, name).
    objects: BTreeMap<(String, String), Value>,
    requests: Vec<String>,
    next_uid: u64,
    /// Fail the request of this index with this code.
    fail: Option<(usize, u16)>,
    /// Never answer requests from this index on.
    hang_from: Option<usize>,
    admission: Option<Admission>,
    kubelet: Option<Arc<dyn Kubelet>>,
    /// Pods the kubelet was given, by name: their status is its.
    started: BTreeSet<String>,
    /// What the kubelet is to do once the request's changes are stored.
    actions: Vec<Action>,
    /// Before a DELETE of this (resource, name), the object is made
    /// again under its name (a new uid), as by someone else.
    remade_before_delete: Option<(String, String)>,
}

enum Action {
    Start(Value, Vec<Value>),
    Remove(String),
}

/// The played API server; clones share it.
#[derive(Clone, Default)]
pub struct FakeCluster {
    state: Arc<Mutex<State>>,
}

/// The namespace every object lives in.
pub const NAMESPACE: &str = "sandboxes";

impl FakeCluster {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A kube client whose requests this cluster answers, from a task on
    /// the current runtime.
    pub fn client(&self) -> kube::Client {
        let (service, mut handle) =
            tower_test::mock::pair::<Request<Body>, Response<Full<Bytes>>>();
        let me = self.clone();
        tokio::spawn(async move {
            while let Some((request, respond)) = handle.next_request().await {
                let (parts, body) = request.into_parts();
                let body = body
                    .collect()
                    .await
                    .map(|b| b.to_bytes())
                    .unwrap_or_default();
                let index = {
                    let mut s = me.state();
                    s.requests.push(describe(&parts.method, parts.uri.path()));
                    s.requests.len() - 1
                };
                if me.state().hang_from.is_some_and(|from| index >= from) {
                    // Kept unanswered: the caller waits until it is dropped.
                    std::mem::forget(respond);
                    continue;
                }
                let injected = me.state().fail.filter(|(at, _)| *at == index);
                let (code, answer) = match injected {
                    Some((_, code)) => status(code, "InternalError", "injected failure"),
                    None => me.answer(&parts.method, parts.uri.path(), parts.uri.query(), &body),
                };
                let response = Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(answer.to_string())));
                match response {
                    Ok(r) => respond.send_response(r),
                    Err(e) => respond.send_error(e),
                }
            }
        });
        kube::Client::new(service, NAMESPACE)
    }

    /// Every request so far, as `METHOD resource[/name]`.
    pub fn requests(&self) -> Vec<String> {
        self.state().requests.clone()
    }

    /// The next request of index `at` fails with `code`.
    pub fn fail_at(&self, at: usize, code: u16) {
        self.state().fail = Some((at, code));
    }

    /// Requests from index `at` on are never answered.
    pub fn hang_from(&self, at: Option<usize>) {
        self.state().hang_from = at;
    }

    pub fn admission(&self, change: Option<Admission>) {
        self.state().admission = change;
    }

    /// Pods are run by `kubelet` (the played one by default).
    pub fn kubelet(&self, kubelet: Arc<dyn Kubelet>) {
        self.state().kubelet = Some(kubelet);
    }

    /// Pods are run by the played kubelet, behaving as `how`.
    pub fn played(&self, how: Played) {
        self.kubelet(Arc::new(PlayedKubelet {
            how,
            pods: Mutex::default(),
            started: Default::default(),
            ending: Mutex::default(),
        }));
    }

    pub fn remake_before_delete(&self, resource: &str, name: &str) {
        self.state().remade_before_delete = Some((resource.into(), name.into()));
    }

    /// The stored object, if any.
    pub fn get(&self, resource: &str, name: &str) -> Option<Value> {
        self.state()
            .objects
            .get(&(resource.to_owned(), name.to_owned()))
            .cloned()
    }

    /// The names of the stored objects of `resource`.
    pub fn names(&self, resource: &str) -> Vec<String> {
        self.state()
            .objects
            .keys()
            .filter(|(r, _)| r == resource)
            .map(|(_, n)| n.clone())
            .collect()
    }

    /// Stores `object` as if someone else had made it.
    pub fn put(&self, resource: &str, mut object: Value) {
        let mut s = self.state();
        let name = object["metadata"]["name"].as_str().unwrap_or("").to_owned();
        s.next_uid += 1;
        object["metadata"]["uid"] = json!(format!("uid-{}", s.next_uid));
        s.objects.insert((resource.to_owned(), name), object);
    }

    fn answer(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        body: &[u8],
    ) -> (u16, Value) {
        let Some((resource, name)) = route(path) else {
            return status(404, "NotFound", &format!("no route for {path}"));
        };
        let body: Value = if body.is_empty() {
            Value::Null
        } else {
            match serde_json::from_slice(body) {
                Ok(v) => v,
                Err(e) => return status(400, "BadRequest", &e.to_string()),
            }
        };
        let (code, mut answer, actions, kubelet, started) = {
            let mut s = self.state();
            let (code, answer) = match (method.as_str(), name) {
                ("POST", None) => s.create(&resource, body),
                ("GET", None) => s.list(&resource, query),
                ("GET", Some(name)) => match s.objects.get(&(resource.clone(), name.clone())) {
                    Some(o) => (200, o.clone()),
                    None => not_found(&resource, &name),
                },
                ("PATCH", Some(name)) => s.patch(&resource, &name, &body),
                ("PUT", Some(name)) => s.replace(&resource, &name, body),
                ("DELETE", Some(name)) => s.delete(&resource, &name, &body),
                _ => status(405, "MethodNotAllowed", &format!("{method} {path}")),
            };
            let kubelet = s
                .kubelet
                .get_or_insert_with(|| {
                    Arc::new(PlayedKubelet {
                        how: Played::Runs,
                        pods: Mutex::default(),
                        started: Default::default(),
                        ending: Mutex::default(),
                    })
                })
                .clone();
            (
                code,
                answer,
                std::mem::take(&mut s.actions),
                kubelet,
                s.started.clone(),
            )
        };
        // The kubelet acts once the request's changes are stored, outside
        // the lock: a real one takes its time.
        for action in actions {
            match action {
                Action::Start(pod, secrets) => kubelet.start(&pod, &secrets),
                Action::Remove(pod) => kubelet.remove(&pod),
            }
        }
        if resource == "pods" && code < 300 {
            let items = match answer.get_mut("items").and_then(Value::as_array_mut) {
                Some(items) => items.iter_mut().collect::<Vec<_>>(),
                None => vec![&mut answer],
            };
            for pod in items {
                let name = pod["metadata"]["name"].as_str().unwrap_or("").to_owned();
                if started.contains(&name) {
                    pod["status"] = kubelet.status(&name);
                }
            }
        }
        (code, answer)
    }
}

impl State {
    fn create(&mut self, resource: &str, mut object: Value) -> (u16, Value) {
        let Some(name) = object["metadata"]["name"].as_str().map(str::to_owned) else {
            return invalid("metadata.name: Required value");
        };
        if self
            .objects
            .contains_key(&(resource.to_owned(), name.clone()))
        {
            return status(
                409,
                "AlreadyExists",
                &format!("{resource} \"{name}\" already exists"),
            );
        }
        if let Some(refs) = object["metadata"]["ownerReferences"].as_array() {
            for r in refs {
                if r["uid"].as_str().is_none_or(str::is_empty) {
                    return invalid(
                        "metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty",
                    );
                }
            }
        }
        self.next_uid += 1;
        object["metadata"]["uid"] = json!(format!("uid-{}", self.next_uid));
        object["metadata"]["namespace"] = json!(NAMESPACE);
        object["metadata"]["resourceVersion"] = json!(self.next_uid.to_string());
        if resource == "pods" {
            defaults(&mut object);
            if let Some(admit) = &self.admission {
                admit(&mut object);
            }
            object["status"] = json!({"phase": "Pending"});
        }
        self.objects
            .insert((resource.to_owned(), name), object.clone());
        (201, object)
    }

    fn list(&self, resource: &str, query: Option<&str>) -> (u16, Value) {
        let selector = query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .find_map(|kv| kv.strip_prefix("labelSelector="))
            .map(decode)
            .unwrap_or_default();
        let wanted: Vec<(&str, &str)> = selector
            .split(',')
            .filter(|s| !s.is_empty())
            .filter_map(|s| s.split_once('='))
            .collect();
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|((r, _), _)| r == resource)
            .map(|(_, o)| o)
            .filter(|o| {
                wanted
                    .iter()
                    .all(|(k, v)| o["metadata"]["labels"][*k].as_str() == Some(*v))
            })
            .cloned()
            .collect();
        (
            200,
            json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}),
        )
    }

    fn patch(&mut self, resource: &str, name: &str, patch: &Value) -> (u16, Value) {
        let key = (resource.to_owned(), name.to_owned());
        let Some(old) = self.objects.get(&key).cloned() else {
            return not_found(resource, name);
        };
        if let Some(uid) = patch["metadata"]["uid"].as_str()
            && Some(uid) != old["metadata"]["uid"].as_str()
        {
            return status(
                409,
                "Conflict",
                "Precondition failed: UID in precondition does not match the object",
            );
        }
        let mut new = old.clone();
        merge(&mut new, patch);
        self.update(resource, &key, &old, new)
    }

    fn replace(&mut self, resource: &str, name: &str, new: Value) -> (u16, Value) {
        let key = (resource.to_owned(), name.to_owned());
        let Some(old) = self.objects.get(&key).cloned() else {
            return not_found(resource, name);
        };
        self.update(resource, &key, &old, new)
    }

    /// What an update may change: an immutable Secret nothing of its
    /// data; a Pod's spec only its gates, and those only removed.
    fn update(
        &mut self,
        resource: &str,
        key: &(String, String),
        old: &Value,
        mut new: Value,
    ) -> (u16, Value) {
        if resource == "secrets"
            && old["immutable"] == json!(true)
            && (new["data"] != old["data"]
                || new["immutable"] != old["immutable"]
                || !new["stringData"].is_null())
        {
            return invalid("data: Forbidden: field is immutable when `immutable` is set");
        }
        if resource == "pods" {
            let gates = |v: &Value| {
                v["spec"]["schedulingGates"]
                    .as_array()
                    .map(|g| {
                        g.iter()
                            .filter_map(|g| g["name"].as_str().map(str::to_owned))
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default()
            };
            let (before, after) = (gates(old), gates(&new));
            if after.iter().any(|g| !before.contains(g)) {
                return invalid(
                    "spec.schedulingGates: Forbidden: only deletion is allowed, but found new scheduling gate",
                );
            }
            let mut a = old["spec"].clone();
            let mut b = new["spec"].clone();
            a["schedulingGates"] = Value::Null;
            b["schedulingGates"] = Value::Null;
            if a != b {
                return invalid(
                    "spec: Forbidden: pod updates may not change fields other than the gates, images and a few others",
                );
            }
            new["metadata"]["uid"] = old["metadata"]["uid"].clone();
            if !before.is_empty() && after.is_empty() {
                self.schedule(&new);
            }
        }
        self.objects.insert(key.clone(), new.clone());
        (200, new)
    }

    /// Hands a Pod whose gates are gone to the kubelet, with the
    /// Secrets it may mount.
    fn schedule(&mut self, pod: &Value) {
        let secrets = self
            .objects
            .iter()
            .filter(|((r, _), _)| r == "secrets")
            .map(|(_, o)| o.clone())
            .collect();
        let name = pod["metadata"]["name"].as_str().unwrap_or("").to_owned();
        self.started.insert(name);
        self.actions.push(Action::Start(pod.clone(), secrets));
    }

    fn delete(&mut self, resource: &str, name: &str, options: &Value) -> (u16, Value) {
        let key = (resource.to_owned(), name.to_owned());
        if self.remade_before_delete.as_ref() == Some(&key)
            && let Some(o) = self.objects.get_mut(&key)
        {
            self.next_uid += 1;
            o["metadata"]["uid"] = json!(format!("uid-{}", self.next_uid));
        }
        let Some(old) = self.objects.get(&key).cloned() else {
            return not_found(resource, name);
        };
        if let Some(uid) = options["preconditions"]["uid"].as_str()
            && Some(uid) != old["metadata"]["uid"].as_str()
        {
            return status(
                409,
                "Conflict",
                "Precondition failed: UID in precondition does not match the object",
            );
        }
        self.objects.remove(&key);
        self.forget(&key);
        // The garbage collector: what the deleted object owned goes too.
        let uid = old["metadata"]["uid"].clone();
        let owned: Vec<(String, String)> = self
            .objects
            .iter()
            .filter(|(_, o)| {
                o["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in owned {
            self.objects.remove(&k);
            self.forget(&k);
        }
        (200, old)
    }

    /// A deleted Pod's kubelet stops it.
    fn forget(&mut self, (resource, name): &(String, String)) {
        if resource == "pods" && self.started.remove(name) {
            self.actions.push(Action::Remove(name.clone()));
        }
    }
}

/// The played kubelet.
struct PlayedKubelet {
    how: Played,
    /// By Pod: its status.
    pods: Mutex<BTreeMap<String, Value>>,
    /// Pods started so far, for their addresses.
    started: std::sync::atomic::AtomicU32,
    /// Workload Pods to end, by name: the exit status, and how many reads
    /// of their status still see them run.
    ending: Mutex<BTreeMap<String, (i32, u32)>>,
}

impl Kubelet for PlayedKubelet {
    fn start(&self, pod: &Value, _secrets: &[Value]) {
        let mut pods = self
            .pods
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = self
            .started
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let ip = if self.how == Played::RunsOnIpv6 {
            format!("fd00:10:42::{n:x}")
        } else {
            format!("10.42.0.{n}")
        };
        let supervisor = pod["metadata"]["labels"]["openshell.dev/role"] == json!("supervisor");
        let main = if supervisor { "supervisor" } else { "workload" };
        let (phase, ended) = match self.how {
            Played::WorkloadFails if !supervisor => ("Failed", Some(1)),
            Played::EndsAtOnce(0) if supervisor => ("Succeeded", Some(0)),
            Played::EndsAtOnce(code) if supervisor => ("Failed", Some(code)),
            _ => ("Running", None),
        };
        let state = match ended {
            Some(code) => json!({"terminated": {"exitCode": code}}),
            None => json!({"running": {}}),
        };
        let ready = supervisor && matches!(self.how, Played::Runs | Played::RunsOnIpv6);
        let name = pod["metadata"]["name"].as_str().unwrap_or("").to_owned();
        // The workload, which runs only once its supervisor attached,
        // ends after it.
        if let (Some(code), Some(workload)) = (ended, name.strip_suffix("-supervisor")) {
            let mut ending = self
                .ending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            ending.insert(format!("{workload}-workload"), (code, 1));
        }
        pods.insert(
            name,
            json!({
                "phase": phase,
                "podIP": ip,
                "message": ended.map(|c| format!("{main} exited with status {c}")).unwrap_or_default(),
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                "containerStatuses": [{
                    "name": main, "image": "", "imageID": "", "ready": ready,
                    "restartCount": 0, "state": state,
                }],
            }),
        );
    }

    fn status(&self, pod: &str) -> Value {
        let mut pods = self
            .pods
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut ending = self
            .ending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match ending.get_mut(pod) {
            Some((_, reads)) if *reads > 0 => *reads -= 1,
            Some(&mut (code, _)) => {
                ending.remove(pod);
                if let Some(w) = pods.get_mut(pod) {
                    w["phase"] = json!(if code == 0 { "Succeeded" } else { "Failed" });
                    w["containerStatuses"] = json!([{"name": "workload", "image": "",
                        "imageID": "", "ready": false, "restartCount": 0,
                        "state": {"terminated": {"exitCode": code}}}]);
                }
            }
            None => {}
        }
        pods.get(pod)
            .cloned()
            .unwrap_or_else(|| json!({"phase": "Pending"}))
    }

    fn remove(&self, pod: &str) {
        let mut pods = self
            .pods
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        pods.remove(pod);
    }
}

/// What the API server fills into a Pod that leaves it out.
fn defaults(pod: &mut Value) {
    let spec = &mut pod["spec"];
    for (key, value) in [
        ("dnsPolicy", json!("ClusterFirst")),
        ("schedulerName", json!("default-scheduler")),
        ("serviceAccountName", json!("default")),
        ("priority", json!(0)),
        (
            "tolerations",
            json!([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
        ),
    ] {
        if spec[key].is_null() {
            spec[key] = value;
        }
    }
    for list in ["containers", "initContainers"] {
        if let Some(containers) = spec[list].as_array_mut() {
            for c in containers {
                c["imagePullPolicy"] = json!("IfNotPresent");
                c["terminationMessagePath"] = json!("/dev/termination-log");
                c["terminationMessagePolicy"] = json!("File");
                c["resources"] = json!({});
            }
        }
    }
}

/// RFC 7386: `null` removes, objects merge, anything else replaces.
fn merge(target: &mut Value, patch: &Value) {
    let Some(fields) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    for (k, v) in fields {
        if v.is_null() {
            if let Some(o) = target.as_object_mut() {
                o.remove(k);
            }
        } else {
            merge(&mut target[k], v);
        }
    }
}

/// `(resource, name)` of a namespaced path of the three kinds served.
fn route(path: &str) -> Option<(String, Option<String>)> {
    let rest = path
        .strip_prefix("/api/v1/namespaces/")
        .or_else(|| path.strip_prefix("/apis/networking.k8s.io/v1/namespaces/"))?;
    let mut parts = rest.split('/');
    if parts.next()? != NAMESPACE {
        return None;
    }
    let resource = parts.next()?.to_owned();
    if !["pods", "secrets", "networkpolicies"].contains(&resource.as_str()) {
        return None;
    }
    Some((resource, parts.next().map(str::to_owned)))
}

fn describe(method: &Method, path: &str) -> String {
    let Some((resource, name)) = route(path) else {
        return format!("{method} {path}");
    };
    let list = name.is_none() && method == Method::GET;
    let verb = if list {
        "LIST".to_owned()
    } else {
        method.to_string()
    };
    match name {
        Some(name) => format!("{verb} {resource}/{name}"),
        None => format!("{verb} {resource}"),
    }
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code}),
    )
}

fn not_found(resource: &str, name: &str) -> (u16, Value) {
    status(404, "NotFound", &format!("{resource} \"{name}\" not found"))
}

fn invalid(message: &str) -> (u16, Value) {
    status(422, "Invalid", message)
}
