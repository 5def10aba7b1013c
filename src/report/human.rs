//! miette rendering of our diagnostics.

use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteSpanContents, SourceCode,
    SourceSpan, SpanContents,
};
use policy_lang::diag::{Diagnostic, Severity};
use policy_lang::source::SourceFile;

struct FileSource(SourceFile);

impl SourceCode for FileSource {
    fn read_span<'a>(
        &'a self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'a> + 'a>, miette::MietteError> {
        let c = self
            .0
            .text()
            .read_span(span, context_lines_before, context_lines_after)?;
        Ok(Box::new(MietteSpanContents::new_named(
            self.0.path().to_string(),
            c.data(),
            *c.span(),
            c.line(),
            c.column(),
            c.line_count(),
        )))
    }
}

struct Rendered<'a> {
    d: &'a Diagnostic,
    src: FileSource,
}

impl std::fmt::Debug for Rendered<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.d.message)
    }
}

impl std::fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.d.code.id, self.d.message)
    }
}

impl std::error::Error for Rendered<'_> {}

impl miette::Diagnostic for Rendered<'_> {
    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.d.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }

    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        (!self.d.help.is_empty()).then(|| Box::new(&self.d.help) as Box<dyn std::fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&self.src)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let primary = LabeledSpan::new_primary_with_span(
            (!self.d.label.is_empty()).then(|| self.d.label.clone()),
            (self.d.span.start, self.d.span.len()),
        );
        let secondary = self.d.secondary.iter().map(|l| {
            LabeledSpan::new_with_span(Some(l.text.clone()), (l.span.start, l.span.len()))
        });
        Some(Box::new(std::iter::once(primary).chain(secondary)))
    }
}

pub fn render(d: &Diagnostic) -> String {
    use std::io::IsTerminal as _;
    let theme = if std::io::stderr().is_terminal() {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme).with_width(100);
    let rendered = Rendered {
        d,
        src: FileSource(d.file.clone()),
    };
    let mut out = String::new();
    if handler.render_report(&mut out, &rendered).is_err() {
        let (line, col) = d.line_col();
        out = format!(
            "{}:{line}:{col}: {} {}: {}\n",
            d.file.path(),
            d.code.id,
            severity_word(d.severity),
            d.message
        );
    }
    out
}

fn severity_word(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}
