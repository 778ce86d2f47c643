//! kubectl-style tables: a header row, left-aligned columns, three spaces between them.

/// A table under construction.
#[derive(Debug, Default)]
pub(crate) struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Spaces between two columns.
    pub const GAP: usize = 3;

    /// A table with the given column headers.
    pub fn new(headers: &[&str]) -> Self {
        Self {
            rows: vec![headers.iter().map(|h| (*h).to_owned()).collect()],
        }
    }

    /// Appends a row; missing cells are blank, extra cells are kept.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Each column's width: its widest cell, in chars.
    fn widths(&self) -> Vec<usize> {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut widths = vec![0; columns];
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        widths
    }

    /// The width of the table as rendered, in chars: the columns and the gaps between them.
    pub fn width(&self) -> usize {
        let widths = self.widths();
        widths.iter().sum::<usize>() + Self::GAP * widths.len().saturating_sub(1)
    }

    /// Renders with every column as wide as its widest cell (in chars); no trailing spaces.
    pub fn render(&self) -> String {
        let widths = self.widths();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.extend(std::iter::repeat_n(' ', Self::GAP));
                }
                line.push_str(cell);
                let pad = widths[i].saturating_sub(cell.chars().count());
                line.extend(std::iter::repeat_n(' ', pad));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn aligns_columns_without_trailing_space() {
        let mut t = Table::new(&["NAME", "SIZE"]);
        t.row(vec!["a-long-name".into(), "1 B".into()]);
        t.row(vec!["b".into(), "1023 MiB".into()]);
        assert_eq!(
            t.render(),
            "NAME          SIZE\na-long-name   1 B\nb             1023 MiB\n"
        );
        assert_eq!(t.width(), "a-long-name   1023 MiB".len());
    }
}
