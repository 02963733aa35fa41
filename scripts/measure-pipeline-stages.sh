#!/usr/bin/env bash
# Measures stages 1 and 2 of the turn pipeline with convrag's own evaluator.
#
# Run from the repository root after `cargo build`:
#   scripts/measure-pipeline-stages.sh [path/to/convrag]
# Prints, for automatic and manual runs, the PTKB ranking measures (all statements ranked:
# nDCG@3, P@3, R@3, MRR ...; selected subset: set_P/set_recall/set_F) on iKAT 2023 test topics
# against the NIST and organizers' PTKB qrels, then ROUGE-1 of the rewrites (and of the raw
# utterances, the no-rewrite baseline) against iKAT 2023 resolved utterances and CAsT 2019/2020
# manual rewrites. Intermediate runs go to a temporary directory, removed at exit.
set -euo pipefail
B=${1:-${CARGO_TARGET_DIR:-target}/debug/convrag}
D=$(dirname "$0")/../../shared/data
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
IKAT=$D/ikat/official/2023_test_topics.json

for rt in automatic manual; do
  "$B" pipeline ptkb --topics "$IKAT" --run-type $rt --list all --output "$T/all.json"
  "$B" pipeline ptkb --topics "$IKAT" --run-type $rt --output "$T/sel.json"
  for q in nist org; do
    echo "# PTKB $rt, $q qrels, all statements ranked"
    "$B" eval ptkb --qrels "$D/ikat/qrels/2023_ptkb_qrels_$q.txt" --run "$T/all.json" \
      | grep -E '^(ndcg_cut_3|P_3|recall_3|recip_rank) '
    echo "# PTKB $rt, $q qrels, selected statements"
    "$B" eval ptkb --qrels "$D/ikat/qrels/2023_ptkb_qrels_$q.txt" --run "$T/sel.json" \
      | grep -E '^set_(P|recall|F) '
  done
done

rewrite() { # name topics reference
  "$B" pipeline rewrite --topics "$2" --output "$T/rw.tsv"
  echo "# rewrite $1: convrag"
  "$B" eval rewrite --reference "$3" --run "$T/rw.tsv" | grep rouge1
  echo "# rewrite $1: raw utterance"
  "$B" eval rewrite --reference "$3" --run "$2" | grep rouge1
}
rewrite ikat2023 "$IKAT" "$IKAT"
rewrite cast2019 "$D/trec-cast/2019/evaluation_topics_v1.0.json" \
  "$D/trec-cast/2019/evaluation_topics_annotated_resolved_v1.0.tsv"
rewrite cast2020 "$D/trec-cast/2020/2020_manual_evaluation_topics_v1.0.json" \
  "$D/trec-cast/2020/2020_manual_evaluation_topics_v1.0.json"
