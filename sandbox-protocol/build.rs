//! Generates the protocol's messages and the Broker service from
//! proto/sandbox.proto, with protox in place of protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "../proto/sandbox.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["../proto"])?;
    tonic_prost_build::configure().compile_fds(descriptors)?;
    Ok(())
}
