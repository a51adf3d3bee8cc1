"""Coverage reports people read: lcov tracefiles (:mod:`.lcov`, for ``genhtml`` and IDE
coverage gutters) and an annotated-source HTML page (:mod:`.html`), both made from a result's
:class:`~reward_service.models.CoverageDetail` (requested with ``report.points``), and the
HTML page of a rescoring run (:mod:`.rescore_html`). docs/reports.md describes them."""
