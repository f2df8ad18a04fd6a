// The shape of assets.gen.js, which scripts/build-docs.ts writes (it is not committed).

/** A hash of all four: part of the asset URLs, so they can be cached for good. */
export declare const docsAssetVersion: string;
/** swagger-ui-dist's swagger-ui-bundle.js (a classic script defining SwaggerUIBundle). */
export declare const swaggerScript: string;
/** swagger-ui-dist's swagger-ui.css. */
export declare const swaggerStyles: string;
/** src/docs/swagger-init.js: starts Swagger UI on /openapi.json. */
export declare const initScript: string;
/** src/docs/docs.css. */
export declare const pageStyles: string;
