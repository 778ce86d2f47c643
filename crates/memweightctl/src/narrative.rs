//! `explain`'s reasoning in sentences, from the pool down to the writes: the CLI's prose,
//! written from the numbers of the daemon's `explain` reply.

use memweight_policy::human;
use memweight_proto::ctl::Explanation;

/// The reasoning in sentences, from the pool down to the writes.
#[must_use]
pub fn narrative(e: &Explanation) -> Vec<String> {
    let s = &e.status;
    let p = &e.pool;
    let b = human::bytes;
    let mut out = Vec::new();
    let of = s
        .container
        .as_ref()
        .map(|c| format!("container {c}: "))
        .unwrap_or_default();
    out.push(match (&s.source, s.overridden) {
        (Some(src), _) => format!(
            "{of}weight {} of total weight {}, from {src}",
            s.weight, p.total_weight
        ),
        // A daemon from before weight sources.
        (None, overridden) => format!(
            "{of}weight {} (from the {}) of total weight {}",
            s.weight,
            if overridden {
                "runtime override"
            } else {
                "configuration"
            },
            p.total_weight
        ),
    });
    out.extend(e.setting.label_clamps.iter().map(ToString::to_string));
    out.push(format!(
        "pool capacity {} for total usage {}: {}",
        b(p.capacity),
        b(p.total_usage),
        if p.pressure {
            "under pressure, memory is water-filled by weight"
        } else {
            "no pressure, nothing needs reclaiming"
        }
    ));
    if p.yielding {
        out.push(format!(
            "the host is short and {} beside the managed set stalled on memory {} of the last \
             tick: no managed cgroup is protected (memory.low) while it does, so the kernel's \
             reclaim weighs them against the services beside them",
            p.outside_stall_by.as_deref().unwrap_or("a cgroup"),
            p.outside_stall
                .map_or_else(|| "part".to_owned(), |pct| format!("{pct:.1} %")),
        ));
    }
    let exceed = if s.exceed < 0 {
        format!("{} below", b(s.exceed.unsigned_abs()))
    } else {
        format!("{} above", b(s.exceed.unsigned_abs()))
    };
    out.push(format!(
        "usage {} against expected share {} (EA = TU × W / TW): {exceed} it",
        b(s.usage),
        b(s.expected)
    ));
    out.push(format!(
        "target {} (floor {}{}); reason: {}",
        b(s.target),
        b(s.floor),
        s.ceiling
            .map(|c| format!(", memory.high ceiling {}", b(c)))
            .unwrap_or_default(),
        s.reason
    ));
    if let Some(t) = s.trim {
        out.push(format!(
            "its ceiling is {} {} its share: the kernel's reclaim took it {} often than the \
             cgroups held beside it, and the trim makes up for it on average",
            b(t.unsigned_abs()),
            if t > 0 { "above" } else { "below" },
            if t > 0 { "more" } else { "less" },
        ));
    }
    out.push(format!(
        "entitlement {} is what memory.low protects",
        b(s.entitlement)
    ));
    if let (Some(h), Some(l)) = (&s.original_high, &s.original_low) {
        let shown = |v: &String| {
            v.parse::<u64>()
                .map_or_else(|_| v.clone(), |v| b(v).to_string())
        };
        out.push(format!(
            "the cgroup's own limits (restored on exit): memory.high {}, memory.low {}",
            shown(h),
            shown(l)
        ));
    }
    if let Some(op) = &s.operator {
        out.push(op.clone());
    }
    let mut writes = Vec::new();
    if let Some(h) = &s.wrote_high {
        let shown = h
            .parse::<u64>()
            .map_or_else(|_| h.clone(), |v| b(v).to_string());
        writes.push(format!("memory.high = {shown}"));
    }
    if let Some(l) = s.wrote_low {
        writes.push(format!("memory.low = {}", b(l)));
    }
    if let Some(r) = s.reclaim {
        writes.push(format!("memory.reclaim {}", b(r)));
    }
    out.push(if s.state == memweight_proto::ctl::CgroupState::New {
        "no writes this tick: seen for the first time among many cgroups, it is held at \
         its usage until a full sample (within a few ticks) shows what it holds"
            .to_owned()
    } else if writes.is_empty() {
        format!(
            "no writes this tick: the kernel already holds the decided values (state {})",
            s.state
        )
    } else if p.engine_wait {
        format!(
            "waiting for the container engine's first answer (labels' weights not known \
             yet), would write: {}",
            writes.join(", ")
        )
    } else if !p.enforce {
        format!("dry run, would write: {}", writes.join(", "))
    } else {
        format!("wrote: {}", writes.join(", "))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::tests::{pool, status_row};
    use memweight_proto::ctl::{LabelClamp, LabelField, Setting, Values, WeightSource};

    /// lab/c1 under pressure, 1000 MiB above its share, weight 1 by a runtime override (3 in
    /// the configuration), its memory.high written at 834 MiB.
    fn explanation() -> Explanation {
        let mut status = status_row("lab/c1", true);
        status.weight = 1;
        status.exceed = 1000 << 20;
        status.wrote_high = Some((834_u64 << 20).to_string());
        let values = |weight| Values {
            weight,
            min: None,
            max: None,
        };
        let mut pool = pool();
        pool.pressure = true;
        Explanation {
            status,
            setting: Setting {
                cgroup: "lab/c1".into(),
                managed: true,
                configured: values(3),
                runtime_override: Some(values(1)),
                effective: values(1),
                container: None,
                labels: None,
                source: None,
                label_clamps: Vec::new(),
            },
            pool,
        }
    }

    #[test]
    fn narrative_follows_the_numbers() {
        let e = explanation();
        let text = narrative(&e).join("\n");
        assert!(
            text.contains("weight 1 (from the runtime override) of total weight 6"),
            "{text}"
        );
        assert!(text.contains("under pressure"), "{text}");
        assert!(text.contains("1000 MiB above"), "{text}");
        assert!(text.contains("wrote: memory.high = 834 MiB"), "{text}");
        assert!(!text.contains("trim"), "no trim, no line: {text}");
        let mut trimmed = e.clone();
        trimmed.status.trim = Some(12 << 20);
        let text = narrative(&trimmed).join("\n");
        assert!(
            text.contains("its ceiling is 12 MiB above its share"),
            "{text}"
        );
        assert!(!text.contains("stalled"), "not yielding, no line: {text}");
        let mut yielding = e.clone();
        yielding.pool.yielding = true;
        yielding.pool.outside_stall = Some(7.5);
        yielding.pool.outside_stall_by = Some("lab-pressure".into());
        let text = narrative(&yielding).join("\n");
        assert!(
            text.contains(
                "lab-pressure beside the managed set stalled on memory 7.5 % of the last tick: \
                 no managed cgroup is protected"
            ),
            "{text}"
        );
        let mut quiet = e.clone();
        quiet.status.wrote_high = None;
        quiet.status.exceed = -(500 << 20);
        let text = narrative(&quiet).join("\n");
        assert!(text.contains("500 MiB below"), "{text}");
        assert!(text.contains("no writes this tick"), "{text}");
        assert!(
            !text.contains("own limits"),
            "absent fields, no line: {text}"
        );
        let mut op = e.clone();
        op.status.original_high = Some((700_u64 << 20).to_string());
        op.status.original_low = Some("0".into());
        op.status.operator = Some("memory.high set to 734003200 outside memweightd".into());
        let text = narrative(&op).join("\n");
        assert!(
            text.contains("own limits (restored on exit): memory.high 700 MiB, memory.low 0"),
            "{text}"
        );
        assert!(text.contains("outside memweightd"), "{text}");
        let mut labelled = e.clone();
        labelled.status.container = Some("web".into());
        labelled.status.source = Some(WeightSource::Label {
            label: "memweight.weight".into(),
            container: "web".into(),
        });
        let text = narrative(&labelled).join("\n");
        assert!(
            text.contains(
                "container web: weight 1 of total weight 6, from label memweight.weight on container web"
            ),
            "{text}"
        );
        assert!(!text.contains("clamped"), "no clamp, no line: {text}");
        labelled.setting.label_clamps = vec![
            LabelClamp {
                label: "memweight.weight".into(),
                field: LabelField::Weight,
                asked: 10_000,
                applied: 100,
            },
            LabelClamp {
                label: "memweight.min".into(),
                field: LabelField::Min,
                asked: 1 << 40,
                applied: 0,
            },
            LabelClamp {
                label: "memweight.max".into(),
                field: LabelField::Max,
                asked: 8 << 30,
                applied: 4 << 30,
            },
        ];
        let text = narrative(&labelled).join("\n");
        for line in [
            "label memweight.weight asks weight 10000, more than the rule's label_weight_max: \
             clamped to 100",
            "label memweight.min asks min 1024 GiB, more than the rule's label_min_max: clamped \
             to 0 B",
            "label memweight.max asks max 8192 MiB, above the rule's max: refused, 4096 MiB applies \
             (label_max_may_rise = false)",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} in {text}");
        }
    }
}
