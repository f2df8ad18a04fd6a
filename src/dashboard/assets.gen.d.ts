// The shape of assets.gen.js, which scripts/build-dashboard.ts writes (it is not committed).

/** A hash of the bundle: part of the asset URLs, so they can be cached for good. */
export declare const assetVersion: string;
/** src/dashboard/browser/main.ts and its imports (oauth4webapi included), minified. */
export declare const clientScript: string;
/** src/dashboard/browser/styles.css, minified. */
export declare const clientStyles: string;
