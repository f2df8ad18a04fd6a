// Starts Swagger UI on /docs (served from this worker, like the bundle it calls). A file, not an
// inline script, so the page's Content-Security-Policy can stay at script-src 'self'.
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  // The default would send the document to an online validator; nothing leaves this origin.
  validatorUrl: null,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
  defaultModelsExpandDepth: 0,
  displayRequestDuration: true,
  persistAuthorization: false,
  tryItOutEnabled: false,
});
