//! Where a credential's binding lets its secret go, as a formula: apart
//! from `model` because the rewrite model (`rewrite`) needs it too, and
//! a placeholder is replaced only where the same binding would inject a
//! header, so both must read the binding one way.

use policy_bundle::CredentialBinding;

use crate::domain::{self, Domain};
use crate::formula::{F, Lit, T, and, ids, lit};

/// A credential binding covers host, `methods` (the formula the caller
/// gives: the binding's methods, or `T` where the method is known to be
/// covered) and path.
pub(crate) fn cred_binding(dom: &Domain, c: &CredentialBinding, methods: F) -> F {
    let hosts: Vec<u32> = c
        .hosts
        .iter()
        .flat_map(|h| dom.hosts.atoms_of(&domain::host_key(h)).iter().copied())
        .collect();
    let paths = c.paths.as_ref().map_or(T, |ps| {
        let atoms: Vec<u32> = ps
            .iter()
            .flat_map(|p| dom.paths.atoms_of(&domain::path_key(p)).iter().copied())
            .collect();
        lit(Lit::Path(ids(atoms)))
    });
    and([lit(Lit::Host(ids(hosts))), methods, paths])
}
