//! One string column of a parquet file, streamed row group by row group through the record
//! API (only that column is decoded).

use super::files::CorpusFile;
use super::files::OnText;
use anyhow::{Context, anyhow, bail};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use std::ops::ControlFlow;

/// The rows' `field`, in order.
pub fn rows(file: &CorpusFile, field: &str, f: &mut OnText<'_>) -> anyhow::Result<ControlFlow<()>> {
    let name = file.path.display();
    let damaged = |e: String| anyhow!("{name} is not a readable parquet file ({e}); replace it with a complete copy");
    let handle = std::fs::File::open(&file.path).with_context(|| format!("cannot open {name}"))?;
    let reader = crate::guard::catch(|| SerializedFileReader::new(handle))
        .map_err(damaged)?
        .map_err(|e| damaged(e.to_string()))?;
    let projection = projection(&reader, field, &name.to_string())?;
    let rows = crate::guard::catch(|| reader.get_row_iter(Some(projection)))
        .map_err(damaged)?
        .map_err(|e| damaged(e.to_string()))?;
    for (i, row) in rows.enumerate() {
        let row = row.map_err(|e| anyhow!("{name} row {}: cannot decode it ({e}); the file is damaged", i + 1))?;
        let text = match row.get_column_iter().next().map(|(_, v)| v) {
            Some(Field::Str(s)) => s.as_str(),
            // As a JSON-lines record without its text is: an error, not a document skipped.
            Some(Field::Null) | None => bail!("{name} row {}: column `{field}` is null, not a string", i + 1),
            Some(other) => bail!("{name} row {}: column `{field}` holds {}, not a string", i + 1, preview(other)),
        };
        if f(text)?.is_break() {
            return Ok(ControlFlow::Break(()));
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// A cell's kind and the start of its value, at most 60 characters (a binary or list cell may
/// be megabytes).
fn preview(cell: &Field) -> String {
    let kind = match cell {
        Field::Bytes(_) => "binary data",
        Field::ListInternal(_) => "a list",
        Field::MapInternal(_) => "a map",
        Field::Group(_) => "a struct",
        _ => "a value",
    };
    let text = cell.to_string();
    match text.char_indices().nth(60) {
        Some((end, _)) => format!("{kind} ({}…, {} characters)", &text[..end], text.chars().count()),
        None => format!("{kind} ({text})"),
    }
}

/// The schema of the file's top-level column `field` alone.
fn projection(
    reader: &SerializedFileReader<std::fs::File>,
    field: &str,
    name: &str,
) -> anyhow::Result<parquet::schema::types::Type> {
    let schema = reader.metadata().file_metadata().schema();
    let columns: Vec<&str> = schema.get_fields().iter().map(|c| c.name()).collect();
    let Some(col) = schema.get_fields().iter().find(|c| c.name() == field) else {
        bail!(
            "{name} has no column `{field}` (its columns: {}); set data.text_field to the one that holds the text",
            columns.join(", ")
        )
    };
    parquet::schema::types::Type::group_type_builder(schema.name())
        .with_fields(vec![col.clone()])
        .build()
        .map_err(|e| anyhow!("{name}: cannot select column `{field}` ({e})"))
}
