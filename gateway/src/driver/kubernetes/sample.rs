//! A full set of objects for sample sandboxes, written out and checked
//! against Kubernetes' own schemas (`scripts/validate-k8s-manifests`):
//! what the driver would send, not a copy of it kept by hand.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use super::{
    AdmittedWorkload, DRIVER_ROLE, FENCE, Generation, GenerationSpec, ManifestError,
    SupervisorTrust, bootstrap_secret, driver_role, fence, supervisor_pod, supervisor_secret,
    workload_pod,
};

/// The namespace of the samples.
const NAMESPACE: &str = "openshell-sandboxes";

/// Every object of two sample generations, and the fence, each as a file
/// name (`NAME.KIND.yaml`) and the JSON the API would be sent: one
/// sandbox with a workspace claim, and one whose id is no DNS label, with
/// a timeout, no claim and a workload Pod on IPv6.
///
/// # Errors
/// None in practice: the samples are valid.
pub fn manifests_for_validation() -> Result<Vec<(String, serde_json::Value)>, ManifestError> {
    let (role, binding) = driver_role(NAMESPACE, "openshell", "openshell-gateway")?;
    let mut out = vec![
        file("networkpolicy", FENCE, &fence(NAMESPACE)?)?,
        file("role", DRIVER_ROLE, &role)?,
        file("rolebinding", DRIVER_ROLE, &binding)?,
    ];
    let first = Generation::new(GenerationSpec {
        namespace: NAMESPACE.into(),
        sandbox_id: "task-17".into(),
        generation: 3,
        image: "registry.example/agents/python:3.13".into(),
        command: vec!["/usr/bin/make".into(), "test".into()],
        timeout_seconds: None,
        workspace_claim: Some("task-17-workspace".into()),
        user: 65534,
        group: 65534,
        supervisor_image: "registry.example/openshell/supervisor:0.1.0".into(),
        gateway_urls: vec![
            "https://gateway-0.openshell.svc:8443".into(),
            "https://gateway-1.openshell.svc:8443".into(),
        ],
        labels: BTreeMap::from([("example.com/team".into(), "agents".into())]),
    })?;
    let second = Generation::new(GenerationSpec {
        sandbox_id: "Nightly_Build.2026-12-05.retry-with-a-long-name".into(),
        generation: 1,
        timeout_seconds: Some(600),
        workspace_claim: None,
        labels: BTreeMap::new(),
        ..first.spec().clone()
    })?;
    let admitted = [
        AdmittedWorkload {
            uid: "5f0c2a8e-3b1d-4c6f-9a7e-2d4b6c8e0f13".into(),
            ip: IpAddr::V4(Ipv4Addr::new(10, 42, 0, 17)),
        },
        AdmittedWorkload {
            uid: "b7d1e4f2-8a3c-4e5b-9f60-1c2d3e4f5a6b".into(),
            ip: IpAddr::V6(Ipv6Addr::new(0xfd00, 0x10, 0x42, 0, 0, 0, 0, 0x17)),
        },
    ];
    let trust = SupervisorTrust {
        session: br#"{"id":"sample","generation":1,"token":"sample-token","expires_at":0}"#
            .to_vec(),
        gateway_ca: b"-----BEGIN CERTIFICATE-----\nsample\n-----END CERTIFICATE-----\n".to_vec(),
        trust_keys: b"sample-key-id ed25519 c2FtcGxl\n".to_vec(),
        credential: br#"{"role":"supervisor","sample":true}"#.to_vec(),
    };
    for (g, workload) in [first, second].iter().zip(&admitted) {
        let names = g.names();
        out.push(file("pod", &names.workload_pod, &workload_pod(g))?);
        out.push(file(
            "secret",
            &names.bootstrap_secret,
            &bootstrap_secret(g, &workload.uid, br#"{"version":3,"sample":true}"#)?,
        )?);
        out.push(file(
            "secret",
            &names.supervisor_secret,
            &supervisor_secret(g, &workload.uid, &trust)?,
        )?);
        out.push(file(
            "pod",
            &names.supervisor_pod,
            &supervisor_pod(g, workload)?,
        )?);
    }
    Ok(out)
}

fn file(
    kind: &str,
    name: &str,
    object: &impl Serialize,
) -> Result<(String, serde_json::Value), ManifestError> {
    let value = serde_json::to_value(object)
        .map_err(|e| ManifestError::Encode(format!("{name}.{kind}"), e.to_string()))?;
    Ok((format!("{name}.{kind}.yaml"), value))
}
