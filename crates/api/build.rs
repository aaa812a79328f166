//! Generates the Bigtable protos' Rust types and tonic services with `protox`, so
//! no `protoc` is needed on the build machine.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "google/bigtable/v2/bigtable.proto",
        "google/bigtable/admin/v2/bigtable_table_admin.proto",
        "google/bigtable/admin/v2/bigtable_instance_admin.proto",
    ];
    let fds = protox::compile(protos, ["proto"])?;
    let mut cfg = tonic_prost_build::Config::new();
    cfg.enable_type_names()
        .type_name_domain(["."], "type.googleapis.com");
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .generate_default_stubs(true)
        .bytes(".")
        .include_file("_includes.rs")
        .compile_fds_with_config(fds, cfg)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
