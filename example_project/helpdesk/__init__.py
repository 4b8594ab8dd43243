"""Northwind Cycleworks helpdesk: a small retrieval-augmented question answering app.

The package is organised as a classic two-stage RAG pipeline:

* :mod:`helpdesk.corpus`   - loads the Markdown knowledge base into documents and chunks;
* :mod:`helpdesk.text`     - tokenisation, stopwords and a light suffix-stripping stemmer;
* :mod:`helpdesk.index`    - first-stage BM25 retrieval built on ``bm25s``;
* :mod:`helpdesk.rerank`   - second-stage feature-based reranker;
* :mod:`helpdesk.answer`   - extractive answerer with citations and abstention;
* :mod:`helpdesk.concepts` - glossary of named entities (products, plans, systems);
* :mod:`helpdesk.tools`    - the order and store tools a question needs, as tool calls;
* :mod:`helpdesk.pipeline` - :class:`HelpdeskRAG`, the callable that ties it together.
"""

from .corpus import Chunk, Corpus, Document, load_corpus
from .pipeline import HelpdeskRAG

__all__ = ["Chunk", "Corpus", "Document", "HelpdeskRAG", "load_corpus"]
