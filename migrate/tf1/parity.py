"""The comparison rules the conversion check (`self_check`) and `verify` share: tensors by their
range, detections exactly (ties may swap) or, for mixed precision, by class and IoU.

Tolerance: `|tf2 - tf1| <= atol + rtol * max|tf1|` element-wise on every tensor (the range of
the tensor, see `compare_tensor`), `atol + rtol` on boxes and scores (range 1); detection counts
and classes are compared exactly whatever the tolerance. Mixed precision is judged at
`MIXED_TOLERANCES[precision]` and its detections matched by `match_detections`.
"""

from __future__ import annotations

import numpy as np

from migrate.common.box_matching import pair_by_class, pairwise_iou

DEFAULT_ATOL = 1e-5

DEFAULT_RTOL = 1e-5

# Mixed precision: per tensor the float32 rule `|tf2 - tf1| <= atol + rtol * max|tf1|` at a
# looser rtol, and the score margin of `match_detections`. Measured on the 2018 zoo graph with
# synthetic weights (the test fixture), generated images, Detector: a faithful conversion's
# worst stage is 1.6e-2 of the tensor's range in bfloat16 (8 mantissa bits: 2^-9 = 2e-3 per
# rounding, accumulated over 13 blocks), 3.4e-3 in float16 (11 bits); one weight scaled by 1.5
# (Conv2d_7_pointwise) shows 0.32 there, one batch norm dropped (Conv2d_5_pointwise) 0.46.
# rtol sits ~3x over the faithful worst and >6x under the broken ones. Score margin: matched
# scores differed by up to 0.038 (bfloat16) and 0.015 (float16), neighbouring boxes of near
# equal score included. atol only matters for tensors whose range is ~0.
MIXED_TOLERANCES = {"mixed_bfloat16": {"atol": 1e-3, "rtol": 5e-2, "score_margin": 0.05},
                    "mixed_float16": {"atol": 1e-3, "rtol": 1e-2, "score_margin": 0.02}}

MATCH_IOU = 0.5

NMS_FLIP_BAND = 0.1


def compare_tensor(ours, ref, atol: float, rtol: float) -> dict:
    """Errors of `ours` against the TF1 `ref`.

    ok when every element has `|ours - ref| <= atol + rtol * max|ref|`: rounding differences
    in a conv output scale with the magnitude of the sums it accumulates, i.e. with the
    tensor's range, not with each element's own value (a near-zero element of a ReLU6 map
    carries the same absolute error as a large one). `max_rel_err` is the max abs error
    relative to that range, `max|ref|`; `allowed` that bound, `atol + rtol * max|ref|`.
    """
    ours, ref = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    if ours.shape != ref.shape:
        if ours.size != ref.size:
            return {"shape": list(ref.shape), "tf2_shape": list(ours.shape), "max_abs_err": None,
                    "max_rel_err": None, "ok": False, "note": f"shape {list(ours.shape)} vs TF1 {list(ref.shape)}"}
        ref = ref.reshape(ours.shape)  # e.g. TF1 [N, A, 1, 4] before its Squeeze
    if not (np.all(np.isfinite(ours)) and np.all(np.isfinite(ref))):
        return {"shape": list(ours.shape), "max_abs_err": None, "max_rel_err": None, "ok": False,
                "note": "non-finite values"}
    err = float(np.abs(ours - ref).max()) if ref.size else 0.0
    scale = float(np.abs(ref).max()) if ref.size else 0.0
    allowed = atol + rtol * scale
    return {"shape": list(ours.shape), "max_abs_err": err, "max_rel_err": err / scale if scale else 0.0,
            "allowed": allowed, "ok": err <= allowed}


def compare_detections(ours: dict, ref: dict, index: int, atol: float, rtol: float, score_threshold=None) -> dict:
    """Image `index` of two detection dicts (TF1 layout). Counts and classes must be equal; boxes
    and scores within tolerance. Two detections whose scores are within tolerance may come in
    either order (a tie): they are matched by class, score and box, and the swap is reported."""
    n1, n2 = int(ref["num_detections"][index]), int(ours["num_detections"][index])
    s1, s2 = ref["detection_scores"][index], ours["detection_scores"][index]
    c1, c2 = ref["detection_classes"][index], ours["detection_classes"][index]
    b1, b2 = ref["detection_boxes"][index], ours["detection_boxes"][index]
    out = {"num_tf1": n1, "num_tf2": n2, "classes_equal": False, "max_box_err": None,
           "max_score_err": None, "ties_swapped": 0, "ok": False, "note": None}
    if n1 != n2:
        out["note"] = f"{n1} detections in TF1, {n2} in TF2"
        longer, count = (s1, n1) if n1 > n2 else (s2, n2)
        extra = longer[min(n1, n2):count]
        if score_threshold is not None and extra.size and np.all(np.abs(extra - score_threshold) <= atol):
            out["note"] += f" (the extra scores {extra.tolist()} sit at the score threshold {score_threshold})"
        return out

    def close(a, b):  # boxes and scores live in [0, 1]: their scale is 1
        return bool(np.all(np.abs(a - b) <= atol + rtol))

    used, pairs, unmatched = set(), [], []
    for i in range(n1):
        candidates = [i] + [j for j in range(n2) if j != i]
        match = next((j for j in candidates if j not in used and c2[j] == c1[i]
                      and close(s2[j], s1[i]) and close(b2[j], b1[i])), None)
        if match is None:
            unmatched.append(i)
        else:
            used.add(match)
            pairs.append((i, match))
    if pairs:
        out["max_box_err"] = float(max(np.abs(b2[j] - b1[i]).max() for i, j in pairs))
        out["max_score_err"] = float(max(abs(float(s2[j]) - float(s1[i])) for i, j in pairs))
    out["classes_equal"] = not unmatched and sorted(c1[:n1].tolist()) == sorted(c2[:n2].tolist())
    out["ties_swapped"] = sum(1 for i, j in pairs if i != j)
    out["ok"] = not unmatched
    if unmatched:
        i = unmatched[0]
        out["note"] = (f"{len(unmatched)} TF1 detections without a TF2 counterpart, e.g. #{i}: class "
                       f"{int(c1[i])} score {float(s1[i]):.6f} box {np.round(b1[i], 5).tolist()}; "
                       f"TF2 #{i}: class {int(c2[i])} score {float(s2[i]):.6f} box {np.round(b2[i], 5).tolist()}")
    elif out["ties_swapped"]:
        out["note"] = f"{out['ties_swapped']} detections with scores equal within tolerance came in another order"
    return out


def match_detections(ours: dict, ref: dict, index: int, score_threshold: float, score_margin: float,
                     max_detections: int, nms_iou: float, iou: float = MATCH_IOU,
                     nms_band: float = NMS_FLIP_BAND) -> dict:
    """Image `index` of two detection dicts (TF1 layout), matched one to one by class and box
    (IoU >= `iou`), pairs of highest IoU first: with dense detections a box overlaps its
    neighbours by up to the NMS threshold, and its own counterpart (IoU ~0.99) must win.

    A detection left without a counterpart fails the image when it scores at least
    `floor + score_margin` and is not an NMS flip. `floor`: the score threshold, or the lowest
    score kept when a side returned `max_detections` (the list was cut there): nearer the
    floor, rounding alone moves a detection across it. NMS flip: the other side holds a
    detection of its class scoring at least as high (less the margin) that overlaps it with an
    IoU >= `nms_iou - nms_band` (`suppressor_iou`): that one suppresses it there, or nearly
    does, and which of two boxes overlapping at about the NMS threshold survives is decided
    by rounding (in chains: what a flipped box suppresses flips in turn). So every confident
    detection is either matched or covered by one of its class on the other side.
    Scores of matched pairs are reported (`max_score_err`), not judged: the logits they come
    from are judged as the tensor `concat_1`.
    """
    n1, n2 = int(ref["num_detections"][index]), int(ours["num_detections"][index])
    s1, s2 = ref["detection_scores"][index][:n1], ours["detection_scores"][index][:n2]
    c1, c2 = ref["detection_classes"][index][:n1], ours["detection_classes"][index][:n2]
    b1, b2 = ref["detection_boxes"][index][:n1], ours["detection_boxes"][index][:n2]
    matches = pair_by_class(b1, c1, b2, c2, iou)
    pairs = [(i, j) for i, j, _ in matches]
    used1, used2 = {i for i, _ in pairs}, {j for _, j in pairs}
    floor = float(score_threshold)
    for n, scores in ((n1, s1), (n2, s2)):
        if n and n >= max_detections:
            floor = max(floor, float(scores.min()))
    must = floor + score_margin

    def unmatched(used, scores, classes, boxes, other_scores, other_classes, other_boxes):
        cross = pairwise_iou(boxes, other_boxes) if len(scores) and len(other_scores) else np.zeros((len(scores), 0))
        out = []
        for k in (k for k in range(len(scores)) if k not in used):
            near = [cross[k, m] for m in range(len(other_scores))
                    if other_classes[m] == classes[k] and other_scores[m] >= scores[k] - score_margin]
            suppressor = float(max(near, default=0.0))
            flip = suppressor >= nms_iou - nms_band
            out.append({"index": k, "class": int(classes[k]), "score": float(scores[k]),
                        "box": np.round(boxes[k], 5).tolist(), "suppressor_iou": suppressor, "nms_flip": flip,
                        "excused": bool(float(scores[k]) < must or flip)})
        return out
    unmatched1 = unmatched(used1, s1, c1, b1, s2, c2, b2)
    unmatched2 = unmatched(used2, s2, c2, b2, s1, c1, b1)
    failing = [("TF1", d) for d in unmatched1 if not d["excused"]] + [("TF2", d) for d in unmatched2
                                                                    if not d["excused"]]
    out = {"num_tf1": n1, "num_tf2": n2, "matched": len(pairs),
           "matched_fraction": len(pairs) / max(n1, n2) if max(n1, n2) else 1.0,
           "min_iou": min(value for _, _, value in matches) if matches else None,
           "max_box_err": float(max(np.abs(b2[j] - b1[i]).max() for i, j in pairs)) if pairs else None,
           "max_score_err": float(max(abs(float(s2[j]) - float(s1[i])) for i, j in pairs)) if pairs else None,
           "must_match_from_score": must, "nms_flips": sum(d["nms_flip"] for d in unmatched1 + unmatched2),
           "unmatched_tf1": unmatched1, "unmatched_tf2": unmatched2, "ok": not failing, "note": None}
    if failing:
        side, d = failing[0]
        out["note"] = (f"{len(failing)} detections scoring >= {must:.3f} without a counterpart, e.g. {side} "
                       f"#{d['index']}: class {d['class']} score {d['score']:.4f} box {d['box']}")
    elif unmatched1 or unmatched2:
        out["note"] = (f"{len(unmatched1)} TF1 and {len(unmatched2)} TF2 detections without a counterpart, "
                       f"each below {must:.3f} or an NMS flip")
    return out


def summarise(resolved: dict, per_stage: dict) -> list:
    """Per stage in graph order: the worst of its per-batch comparisons (`allowed`: the bound of
    the batch with the largest abs error, so that the two read together)."""
    tensors = []
    for stage, (key, tensor) in resolved.items():
        results = per_stage[stage]
        errs = [r["max_abs_err"] for r in results if r["max_abs_err"] is not None]
        rels = [r["max_rel_err"] for r in results if r["max_rel_err"] is not None]
        whole = len(errs) == len(results)
        entry = {"name": stage, "tf1_tensor": tensor, "tf2": key, "shape": results[0]["shape"],
                 "max_abs_err": max(errs) if whole else None,
                 "max_rel_err": max(rels) if len(rels) == len(results) else None,
                 "allowed": max(results, key=lambda r: r["max_abs_err"])["allowed"] if whole else None,
                 "ok": all(r["ok"] for r in results)}
        notes = [r["note"] for r in results if r.get("note")]
        if notes:
            entry["note"] = notes[0]
        tensors.append(entry)
    return tensors
