//! The supervisor's own lines on stderr. A leaf: every module may say
//! something without depending on the one that runs the sandbox.

pub(crate) fn note(text: &str) {
    eprintln!("openshell-supervisor: {text}");
}
