"""Relevance judgments: effective grades by precedence (``grades``), qrels and run files as text
(``formats``), and trec_eval's measures (``trec_eval``, with its numpy path ``trec_fast``)."""
