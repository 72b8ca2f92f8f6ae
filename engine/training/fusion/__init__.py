"""Learning the fusion of the routing channels (``engine.routing.fusion.FusionWeights``).

    python -m engine.training.fusion --config configs/train_fusion.toml [--out DIR]
                                     [--memories write|cached|none]

By job: the recipe (``config``), the documents and the channel features of their queries
(``features``: steps 1-3), the fit of the weights (``fit``: step 4), the held-out measurement
and the decision to ship (``report``: steps 5-6), and the run that chains them (``run``).

A handful of weights (a subtree and an own weight per channel: lexical, dense, memory) trained
on Debian documentation, never on the evaluation manuals (``check_not_evaluation``):

1. data: the packages are fetched and the queries made with the training-data code
   (``engine.training.data``, ``engine.training.corpus.document_queries``): heading queries,
   backbone-written questions and, down-weighted, sentence queries (they copy the text, so they
   would teach the fusion that words matched is all that counts);
2. per document: its tree (``build_tree`` with the backbone's tokenizer, as ingest does), its
   routing evidence (lexical tokens, sentence-encoder vectors) and its memories written with
   the shipped parts, each cached on disk (memories cost minutes per manual on a CPU: a
   document without them trains with the memory channel absent);
3. per query: the z-scored subtree and own scores of every channel (``routing.fusion.features``)
   for the children of every parent on the gold path, cached, so training takes seconds;
4. training: L_route of H2MT 3.4 (per-parent softmax over the children's fused scores,
   cross-entropy to the gold child, summed over the path) plus w_sel * L_sel (appendix E;
   with one gold node per query the gold set is one child and L_sel equals L_route), with
   channel dropout (whole channels dropped per query, so the weights hold when one is missing)
   and an L2 pull toward the untrained weights (w_sub = 1, w_own = 0);
5. validation on the held-out document with the real hard top-k router
   (``routing.fused.route_on_evidence``, k = 3) and the evaluation's hit rule
   (``routing.hits``): the untrained z-sum, the learned fusion and each channel alone, with
   and without the memory channel;
6. the weights go to ``assets/fusion.json`` only when the learned fusion beats the untrained
   z-sum on the held-out document's heading and generated questions at k = 3, by more than
   chance on the same queries (paired sign test), with every channel, and is no worse without
   memories (``decide``); the weights (``<out>/fusion.json``) and the measured table
   (``<out>/report.json``, ``<out>/report.md``) are written either way.
"""
