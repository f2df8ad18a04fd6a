import { formEnd } from "./page-dialogs.ts";

/** The Exports view's New export dialog (src/dashboard/browser/exports.ts fills and sends it), beside the page's others. */
export const EXPORT_DIALOG = `<dialog id="export-dialog" aria-labelledby="export-dialog-title">
  <h2 id="export-dialog-title">New export</h2>
  <form id="export-form">
    <fieldset class="field segmented">
      <legend>What to export</legend>
      <label><input type="radio" name="kind" value="catalogue" checked> Catalogue</label>
      <label><input type="radio" name="kind" value="changes"> Changes</label>
    </fieldset>
    <p id="export-kind-hint" class="hint"></p>
    <fieldset class="field segmented">
      <legend>Format</legend>
      <label><input type="radio" name="format" value="parquet" checked> Parquet</label>
      <label><input type="radio" name="format" value="ndjson"> NDJSON</label>
    </fieldset>
    <fieldset id="export-span" class="field group" hidden>
      <legend>Changes to include</legend>
      <div class="field-row">
        <div class="field">
          <label for="export-since">From</label>
          <input id="export-since" name="since" type="datetime-local">
        </div>
        <div class="field">
          <label for="export-until">Until (optional; empty means now)</label>
          <input id="export-until" name="until" type="datetime-local">
        </div>
      </div>
      <div class="field">
        <label for="export-schedule">Keep appending</label>
        <select id="export-schedule" name="schedule" aria-describedby="export-schedule-hint">
          <option value="">No, once</option>
          <option value="hourly">Every hour</option>
          <option value="daily">Every day</option>
        </select>
        <p id="export-schedule-hint" class="hint">Each closed hour's or day's changes are added as their own partition,
          without gap or duplicate. A scheduled export has no end: leave “Until” empty.</p>
      </div>
    </fieldset>
    <details class="rules" id="export-destination">
      <summary>Your own S3-compatible bucket (optional)</summary>
      <p class="hint">Empty: the files stay in our bucket, with download links valid an hour. Filled in: they are written
        to your bucket under the prefix, then the export's id.</p>
      <div class="field">
        <label for="export-endpoint">Endpoint</label>
        <input id="export-endpoint" name="destination.endpoint" type="url" autocomplete="off" spellcheck="false"
          placeholder="https://s3.eu-west-1.amazonaws.com">
      </div>
      <div class="field-row">
        <div class="field">
          <label for="export-bucket">Bucket</label>
          <input id="export-bucket" name="destination.bucket" autocomplete="off" spellcheck="false" placeholder="acme-lake">
        </div>
        <div class="field">
          <label for="export-region">Region</label>
          <input id="export-region" name="destination.region" autocomplete="off" spellcheck="false" placeholder="eu-west-1">
        </div>
      </div>
      <div class="field">
        <label for="export-prefix">Prefix (optional)</label>
        <input id="export-prefix" name="destination.prefix" autocomplete="off" spellcheck="false" placeholder="prices/">
      </div>
      <div class="field">
        <label for="export-access-key">Access key id</label>
        <input id="export-access-key" name="destination.access_key_id" autocomplete="off" spellcheck="false">
      </div>
      <div class="field">
        <label for="export-secret">Secret access key</label>
        <input id="export-secret" name="destination.secret_access_key" type="password" autocomplete="off" spellcheck="false"
          aria-describedby="export-secret-hint">
        <p id="export-secret-hint" class="hint">Stored encrypted and never shown again, here or in the API: to change it,
          start a new export.</p>
      </div>
    </details>
    ${formEnd({ submit: "Start export", id: "export-submit" })}
  </form>
</dialog>`;
