//! `docs/openapi.yaml`, generated: the schemas come from the `crate::wire`
//! types (schemars, JSON Schema 2020-12, the dialect of OpenAPI 3.1), the
//! paths, statuses and roles from `paths`. `openshell-gateway openapi`
//! prints it; a test fails when the checked-in file is not what this
//! module generates, so the document cannot drift from the code.

mod paths;

use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

/// Where the schemas live in the document, as a JSON pointer.
const SCHEMAS: &str = "/components/schemas";

/// The first lines of the file: what it is and how it is made.
pub const HEADER: &str = "\
# The gateway's HTTPS JSON API, generated from gateway/src/wire and
# gateway/src/openapi: do not edit by hand. Regenerate with
#   cargo run -p gateway -- openapi > docs/openapi.yaml
# docs/gateway.md is the prose reference; gateway/tests/openapi.rs checks
# this document against the running server (the routes it answers, and
# every status and body of a real session).
";

/// The two generators: answers are described as the server serializes
/// them (a field it always writes is required, `null` or not), requests
/// as it deserializes them (a field with a default may be left out).
pub(crate) struct Schemas {
    answers: SchemaGenerator,
    requests: SchemaGenerator,
}

impl Schemas {
    fn new() -> Self {
        let settings = SchemaSettings::draft2020_12().with(|s| {
            s.definitions_path = SCHEMAS.into();
            s.meta_schema = None;
        });
        Self {
            answers: settings.clone().for_serialize().into_generator(),
            requests: settings.for_deserialize().into_generator(),
        }
    }

    /// A reference to (or the inline schema of) an answer body.
    pub(crate) fn answer<T: schemars::JsonSchema>(&mut self) -> Value {
        self.answers.subschema_for::<T>().to_value()
    }

    /// A reference to (or the inline schema of) a request body.
    pub(crate) fn request<T: schemars::JsonSchema>(&mut self) -> Value {
        self.requests.subschema_for::<T>().to_value()
    }

    /// Every named schema either generator made, by name. A type both
    /// send and take (an enum) reads the same either way.
    fn definitions(mut self) -> Map<String, Value> {
        let mut all = self.requests.take_definitions(true);
        all.extend(self.answers.take_definitions(true));
        all
    }
}

/// The OpenAPI 3.1 document.
#[must_use]
pub fn document() -> Value {
    let mut schemas = Schemas::new();
    let paths = paths::paths(&mut schemas);
    let definitions = schemas.definitions();
    json!({
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "openshell-gateway",
            "version": env!("CARGO_PKG_VERSION"),
            "description": paths::DESCRIPTION,
            "license": { "name": "Apache-2.0" },
        },
        "servers": [{ "url": "https://127.0.0.1:8443" }],
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A token from `POST /v1/tokens` (roles admin, author, reader), the admin token in `admin.token`, or a sandbox's token (`POST /v1/sandboxes`, `POST /v1/sandboxes/{id}/token`).",
                },
            },
            "parameters": paths::parameters(),
            "responses": paths::error_responses(),
            "schemas": definitions,
        },
    })
}

/// The document as `docs/openapi.yaml` holds it: [`HEADER`], then YAML.
///
/// # Errors
///
/// When YAML cannot represent the document (it always can: it is JSON).
pub fn yaml() -> Result<String, serde_yaml::Error> {
    Ok(format!("{HEADER}{}", serde_yaml::to_string(&document())?))
}
