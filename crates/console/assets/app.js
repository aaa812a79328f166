// Almanac console: start-up.
//
// app.js: loaded last; starts the router once core.js, keyvis.js, views.js and
// metrics.js have defined everything it needs.
'use strict';

// ---------------------------------------------------------------------------
// Start
// ---------------------------------------------------------------------------

window.addEventListener('hashchange', navigate);
navigate();
